package providers_test

import (
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/config"
	"github.com/agentwire/agentwire/internal/server"
	"github.com/agentwire/agentwire/internal/server/providers"
)

// Every provider --llm names is built in, and the banner line of each
// names the provider and the model (building one calls nobody).
func TestModels(t *testing.T) {
	env := map[string]string{"OPENAI_API_KEY": "k", "ANTHROPIC_API_KEY": "k", "GEMINI_API_KEY": "k"}
	for llm, want := range map[string]string{
		"openai":    "openai some-model at OpenAI",
		"anthropic": "anthropic some-model",
		"gemini":    "gemini some-model",
	} {
		cfg, err := config.Parse([]string{"--llm", llm, "--model", "some-model"}, func(k string) string { return env[k] }, io.Discard)
		require.NoError(t, err)
		opts := server.Options{Models: providers.Models()}
		build, ok := opts.Models[cfg.Provider()]
		require.True(t, ok, "--llm %s is built in", llm)
		m, desc, err := build(cfg, nil)
		require.NoError(t, err, llm)
		assert.Equal(t, "some-model", m.Name(), llm)
		assert.Equal(t, want, desc, llm)
	}
	assert.Len(t, providers.Models(), 3)
}
