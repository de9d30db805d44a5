package anthropic

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/llm/llmtest"
)

func TestCheckAsksForTheModel(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Reply{Body: `{"type":"model","id":"claude-sonnet-4-6","display_name":"Claude Sonnet 4.6","created_at":"2026-02-17T00:00:00Z"}`})
	require.NoError(t, newModel(t, srv, Config{}).Check(t.Context()))
	reqs := srv.Requests()
	require.Len(t, reqs, 1)
	assert.Equal(t, "GET /v1/models/claude-sonnet-4-6", reqs[0].Method+" "+reqs[0].Path)
	assert.Equal(t, "sk-ant-test", reqs[0].Header.Get("X-Api-Key"))
}

func TestCheckSaysWhatToChange(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reply llmtest.Reply
		want  []string
	}{
		{"an unknown model", llmtest.Reply{Status: http.StatusNotFound,
			Body: `{"type":"error","error":{"type":"not_found_error","message":"model: claude-sonnet-4-6"}}`},
			[]string{`anthropic model "claude-sonnet-4-6" at `, `has no model "claude-sonnet-4-6"`, "check --model"}},
		{"a refused key", llmtest.Reply{Status: http.StatusUnauthorized,
			Body: `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`},
			[]string{"refused the API key (401 invalid x-api-key)", "set a valid key in ANTHROPIC_API_KEY"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := llmtest.NewServer(t, tc.reply)
			err := newModel(t, srv, Config{}).Check(t.Context())
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.Len(t, srv.Requests(), 1, "a check is not retried")
		})
	}
}
