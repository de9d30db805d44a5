package gemini

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/llm/llmtest"
)

func TestCheckAsksForTheModel(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Reply{Body: `{"name":"models/gemini-2.5-flash","displayName":"Gemini 2.5 Flash","inputTokenLimit":1048576,"outputTokenLimit":65536}`})
	require.NoError(t, newModel(t, srv, Config{}).Check(t.Context()))
	reqs := srv.Requests()
	require.Len(t, reqs, 1)
	assert.Equal(t, "GET", reqs[0].Method)
	assert.Contains(t, reqs[0].Path, "/models/gemini-2.5-flash")
}

func TestCheckSaysWhatToChange(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reply llmtest.Reply
		want  []string
	}{
		{"an unknown model", llmtest.Reply{Status: http.StatusNotFound,
			Body: `{"error":{"code":404,"message":"models/gemini-2.5-flash is not found for API version v1beta","status":"NOT_FOUND"}}`},
			[]string{`gemini model "gemini-2.5-flash" at `, `has no model "gemini-2.5-flash"`, "check --model"}},
		{"a refused key", llmtest.Reply{Status: http.StatusBadRequest,
			Body: `{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT"}}`},
			[]string{"refused the API key (400 API key not valid. Please pass a valid API key.)", "set a valid key in GEMINI_API_KEY"}},
		{"a forbidden key", llmtest.Reply{Status: http.StatusForbidden,
			Body: `{"error":{"code":403,"message":"Permission denied","status":"PERMISSION_DENIED"}}`},
			[]string{"refused the API key (403 Permission denied)", "set a valid key in GEMINI_API_KEY"}},
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
