package threads

import (
	"github.com/agentwire/agentwire/internal/protocol"
	"github.com/agentwire/agentwire/internal/sse"
)

// The open streams of a thread share the SSE frames recently encoded for
// its log events (protocol.SharedFrames): what an event shows as depends
// on the event alone (a stream's projector decides only whether it is
// shown), so however many streams show it, it is rendered and encoded
// once.

// sharedKey names what one log event shows as: the event alone, or, ahead
// of the log, the event at the resume position its SSE id then carries
// (the streams as far ahead share it).
type sharedKey struct {
	id    string
	ahead bool
	at    protocol.Position
}

func newSharedFrames() *protocol.SharedFrames[sharedKey, sse.Frame] {
	return protocol.NewSharedFrames[sharedKey](func(f sse.Frame) int { return len(f.Bytes()) })
}
