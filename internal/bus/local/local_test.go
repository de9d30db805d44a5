package local_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/bus"
	"github.com/agentwire/agentwire/internal/bus/bustest"
	"github.com/agentwire/agentwire/internal/bus/local"
	"github.com/agentwire/agentwire/internal/event"
)

func TestBus(t *testing.T) {
	bustest.Run(t, func(*testing.T) bus.Bus { return local.New() })
}

// TestPreviewsOnlyForThoseWhoAsk: a preview is offered to the subscribers
// that asked for previews, and to no other.
func TestPreviewsOnlyForThoseWhoAsk(t *testing.T) {
	b := local.New()
	defer b.Close()
	asking, err := b.Subscribe(bus.WantPreviews(t.Context()), "t", 4)
	require.NoError(t, err)
	plain, err := b.Subscribe(t.Context(), "t", 4)
	require.NoError(t, err)
	b.Preview("t", event.Event{ID: "p", Preview: 1})
	require.NoError(t, b.Publish(t.Context(), "t", []event.Event{{Thread: "t", Seq: 2, ID: "c"}}))
	for _, want := range []string{"p", "c"} {
		e, err := asking.Next(t.Context())
		require.NoError(t, err)
		assert.Equal(t, want, e.ID)
	}
	e, err := plain.Next(t.Context())
	require.NoError(t, err)
	assert.Equal(t, "c", e.ID, "no preview for a subscriber that did not ask")
}
