package server

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/llm"
)

// --scenario-pacing none plays a paced scenario at once; scenario (the
// default) keeps its delays.
func TestScenarioPacing(t *testing.T) {
	file := filepath.Join(t.TempDir(), "slow.yaml")
	require.NoError(t, os.WriteFile(file, []byte("pacing: {start_delay: 2s}\nrules:\n  - steps:\n      - text: slow\n"), 0o644))
	for _, tc := range []struct {
		pacing string
		slow   bool
	}{{"scenario", true}, {"none", false}} {
		cfg := testConfig(t, "--scenario", file, "--scenario-pacing", tc.pacing)
		m, desc, err := newModel(cfg, nil, nil)
		require.NoError(t, err)
		assert.Equal(t, !tc.slow, desc == "scripted (offline, scenario "+file+"), no delays", "%s: %s", tc.pacing, desc)
		start := time.Now()
		var text string
		for c, err := range m.Stream(t.Context(), llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}) {
			require.NoError(t, err)
			text += c.Text
		}
		took := time.Since(start)
		assert.Equal(t, "slow", text)
		if tc.slow {
			assert.GreaterOrEqual(t, took, 2*time.Second, "the scenario's start delay")
		} else {
			assert.Less(t, took, time.Second, "no delay")
		}
	}
}
