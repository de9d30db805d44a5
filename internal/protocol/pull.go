package protocol

import (
	"context"

	"github.com/agentwire/agentwire/internal/thread"
)

// PullThread follows thread after seq after (or from its end, with
// FromEnd) for a consumer that takes events with Next on its own goroutine
// and waits for notify, which is called, and must not block, whenever Next
// may have something new: an event or the end (Core.Pull). A consumer that
// waits for other things too (an SSE stream's heartbeat and shutdown) has
// them notify the same channel and waits for that one alone.
func PullThread(ctx context.Context, core Core, th string, after int64, notify func()) (*thread.Pull, error) {
	return core.Pull(ctx, th, after, notify)
}
