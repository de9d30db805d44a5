package runs

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/agent"
	"github.com/agentwire/agentwire/internal/bus/local"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/store/memory"
)

// TestAdmitRefusesOnceShutdownBegan takes a slot for a run once Shutdown
// has begun (here, ended: no run was going): there is none, so that no run
// starts that Shutdown does not wait for. Without the check in admit, a
// Post that passed its own check before Shutdown would start such a run.
func TestAdmitRefusesOnceShutdownBegan(t *testing.T) {
	b := local.New()
	t.Cleanup(func() { _ = b.Close() })
	m := New(Config{Claims: memory.New(), Bus: b, Node: "n"})
	sl, err := m.admit()
	require.NoError(t, err, "a slot before Shutdown")
	sl.free()

	m.Shutdown(context.Background())
	_, err = m.admit()
	assert.ErrorIs(t, err, ErrShuttingDown, "a slot after Shutdown")
}

// TestPreparedIsReleasedWithItsLastReference holds a prepared spec for
// two runs besides its preparer: what Prepare opened is released once,
// when the last of them gives it back.
func TestPreparedIsReleasedWithItsLastReference(t *testing.T) {
	released := 0
	m := &Manager{cfg: Config{Prepare: func(context.Context, string, event.RunOptions) (agent.Spec, func(), error) {
		return agent.Spec{System: "s"}, func() { released++ }, nil
	}}}
	p, err := m.prepare(t.Context(), "t1", event.RunOptions{})
	require.NoError(t, err)
	p.hold()
	p.hold()
	p.done()
	p.done()
	assert.Zero(t, released, "released while a run held it")
	p.done()
	assert.Equal(t, 1, released)
	assert.Panics(t, p.done, "given back more often than held")
	assert.Equal(t, 1, released)
}
