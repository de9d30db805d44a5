package scripted_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/llm/scripted"
)

// Every tour loads by its name, and the built-in scenario plays it on its
// phrase exactly as the tour does: no rule of the default takes the
// phrase first. (internal/server's tour tests follow each tour through a
// real server.)
func TestToursAreBuiltIn(t *testing.T) {
	phrases := map[string]string{
		"ag2-tour": "demo ag2 tour", "agentchat-tour": "agentchat tour", "threads-tour": "threads tour",
		"loom-tour": "loom tour", "agentloop-tour": "agentloop tour",
	}
	require.Len(t, scripted.Tours, len(phrases))
	def := scripted.New(scripted.Default(), scripted.WithPacing(scripted.Pacing{}))
	for _, name := range scripted.Tours {
		s, err := scripted.Load(name)
		require.NoError(t, err, name)
		assert.Equal(t, name, s.Name())
		phrase, ok := phrases[name]
		require.True(t, ok, "a phrase for %s", name)
		tour := play(t, scripted.New(s, scripted.WithPacing(scripted.Pacing{})), req(user(phrase)))
		require.NoError(t, tour.err, name)
		assert.True(t, strings.Contains(strings.ToLower(tour.text), "tour"), "%s answers %q with %q", name, phrase, tour.text)
		got := play(t, def, req(user(phrase)))
		assert.Equal(t, tour.text, got.text, "the built-in scenario plays %s on %q", name, phrase)
		assert.Equal(t, tour.calls, got.calls, "the built-in scenario plays %s on %q", name, phrase)
	}
	_, ok := scripted.Builtin("no-such-tour")
	assert.False(t, ok)
}
