package llmtest_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/llm"
	"github.com/agentwire/agentwire/internal/llm/anthropic"
	"github.com/agentwire/agentwire/internal/llm/gemini"
	"github.com/agentwire/agentwire/internal/llm/llmtest"
	"github.com/agentwire/agentwire/internal/llm/openai"
)

// Each vendor's canned answer reads, through its provider, as the text it
// carries, keeping the stream contract.
func TestVendorAnswers(t *testing.T) {
	const text = "The notes say: milk."
	hello := llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}
	structured := hello
	structured.Structured = &llm.Schema{Name: "answer", JSON: []byte(`{"type":"object","properties":{"a":{"type":"string"}}}`)}
	for name, tc := range map[string]struct {
		reply llmtest.Reply
		model func(url string) (llm.Model, error)
		req   llm.Request
	}{
		"openai": {llmtest.OpenAIText(text), func(url string) (llm.Model, error) {
			return openai.New(openai.Config{BaseURL: url + "/v1", APIKey: "k", MaxRetries: -1})
		}, hello},
		"anthropic": {llmtest.AnthropicText(text, ""), func(url string) (llm.Model, error) {
			return anthropic.New(anthropic.Config{BaseURL: url, APIKey: "k", MaxRetries: -1})
		}, hello},
		"anthropic tool": {llmtest.AnthropicText(text, "answer"), func(url string) (llm.Model, error) {
			return anthropic.New(anthropic.Config{BaseURL: url, APIKey: "k", MaxRetries: -1})
		}, structured},
		"gemini": {llmtest.GeminiText(text), func(url string) (llm.Model, error) {
			return gemini.New(gemini.Config{BaseURL: url, APIKey: "k", MaxRetries: -1})
		}, hello},
	} {
		t.Run(name, func(t *testing.T) {
			srv := llmtest.NewServerFunc(t, func(llmtest.Request) llmtest.Reply { return tc.reply })
			m, err := tc.model(srv.URL)
			require.NoError(t, err)
			for range 2 {
				chunks, err := llmtest.Collect(t, m.Stream(t.Context(), tc.req))
				require.NoError(t, err)
				llmtest.CheckStream(t, chunks)
				turn := llmtest.Assemble(chunks)
				assert.Equal(t, text, turn.Text)
				assert.Equal(t, llm.FinishStop, turn.Finish)
			}
			assert.Len(t, srv.Requests(), 2, "a function server answers every request")
		})
	}
}
