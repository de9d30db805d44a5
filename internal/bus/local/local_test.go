package local_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/bus"
	"github.com/agentwire/agentwire/internal/bus/bustest"
	"github.com/agentwire/agentwire/internal/bus/local"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/metrics"
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

// TestWaitsForCommits: a thread waits for commits while it has a
// subscriber that takes no previews, and no longer once that one is gone,
// closed or dropped as too slow.
func TestWaitsForCommits(t *testing.T) {
	b := local.New()
	defer b.Close()
	assert.False(t, b.WaitsForCommits("t"), "no subscriber")
	asking, err := b.Subscribe(bus.WantPreviews(t.Context()), "t", 4)
	require.NoError(t, err)
	assert.False(t, b.WaitsForCommits("t"), "only one that takes previews")

	plain, err := b.Subscribe(t.Context(), "t", 4)
	require.NoError(t, err)
	assert.True(t, b.WaitsForCommits("t"))
	assert.False(t, b.WaitsForCommits("u"), "another thread")
	plain.Close()
	plain.Close()
	assert.False(t, b.WaitsForCommits("t"), "closed, twice")

	slow, err := b.Subscribe(t.Context(), "t", 1)
	require.NoError(t, err)
	assert.True(t, b.WaitsForCommits("t"))
	for seq := range int64(3) {
		require.NoError(t, b.Publish(t.Context(), "t", []event.Event{{Thread: "t", Seq: seq + 1}}))
	}
	assert.False(t, b.WaitsForCommits("t"), "dropped as too slow")
	slow.Close()
	assert.False(t, b.WaitsForCommits("t"))
	asking.Close()
}

// TestPreviewsDroppedAreCounted: a preview offered to a subscriber whose
// queue is full is dropped, and counted as such.
func TestPreviewsDroppedAreCounted(t *testing.T) {
	m := metrics.New()
	b := local.New(local.WithMetrics(m))
	defer b.Close()
	sub, err := b.Subscribe(bus.WantPreviews(t.Context()), "t", 1)
	require.NoError(t, err)
	defer sub.Close()
	b.Preview("t", event.Event{ID: "p1", Preview: 1})
	b.Preview("t", event.Event{ID: "p2", Preview: 1})
	delivered, _ := m.Sample("agentwire_previews_total", map[string]string{"result": "delivered"})
	dropped, _ := m.Sample("agentwire_previews_total", map[string]string{"result": "dropped"})
	assert.Equal(t, 1.0, delivered)
	assert.Equal(t, 1.0, dropped)
}
