package openai

import (
	"errors"
	"net"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/llm"
	"github.com/agentwire/agentwire/internal/llm/llmtest"
)

const modelList = `{"object":"list","data":[` +
	`{"id":"gpt-4o","object":"model","created":1715367049,"owned_by":"system"},` +
	`{"id":"gpt-4o-mini","object":"model","created":1721172741,"owned_by":"system"}]}`

func TestCheckListsTheServersModels(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Reply{Body: modelList})
	require.NoError(t, newModel(t, srv, Config{}).Check(t.Context()))
	reqs := srv.Requests()
	require.Len(t, reqs, 1)
	assert.Equal(t, "GET /v1/models", reqs[0].Method+" "+reqs[0].Path)
	assert.Equal(t, "Bearer sk-test", reqs[0].Header.Get("Authorization"))
}

func TestCheckSaysWhatToChange(t *testing.T) {
	for _, tc := range []struct {
		name  string
		model string
		reply llmtest.Reply
		want  []string
	}{
		{"a model the server lacks", "llama3.2", llmtest.Reply{Body: modelList},
			[]string{`has no model "llama3.2" (it has gpt-4o, gpt-4o-mini)`, "set --model to one of them"}},
		{"a server with no model loaded", "llama3.2", llmtest.Reply{Body: `{"object":"list","data":[]}`},
			[]string{"(it lists none)", "has loaded a model"}},
		{"a refused key", "", llmtest.Reply{Status: http.StatusUnauthorized,
			Body: `{"error":{"message":"Incorrect API key provided: sk-test.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`},
			[]string{"refused the API key (401 Incorrect API key provided: sk-test.)", "set a valid key in OPENAI_API_KEY"}},
		{"a URL without the API (no /v1)", "", llmtest.Reply{Status: http.StatusNotFound, Body: `404 page not found`},
			[]string{"(404 ", "check --model", "OPENAI_BASE_URL"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := llmtest.NewServer(t, tc.reply)
			err := newModel(t, srv, Config{Model: tc.model}).Check(t.Context())
			_, ok := errors.AsType[*llm.CallError](err)
			require.True(t, ok, "%v is a *llm.CallError", err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.Len(t, srv.Requests(), 1, "a check is not retried")
		})
	}
}

// A wrong OPENAI_BASE_URL, the first mistake people make with a local
// server: the check and every call name the variable.
func TestUnreachableServerNamesTheVariable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	base := "http://" + l.Addr().String() + "/v1"
	require.NoError(t, l.Close())
	m, err := New(Config{BaseURL: base, MaxRetries: -1})
	require.NoError(t, err)

	checkErr := m.Check(t.Context())
	_, streamErr := llmtest.Collect(t, m.Stream(t.Context(), hello))
	for _, err := range []error{checkErr, streamErr} {
		require.Error(t, err)
		assert.Contains(t, err.Error(), `openai model "gpt-4o-mini" at `+base+" cannot be reached (")
		assert.Contains(t, err.Error(), "connection refused")
		assert.Contains(t, err.Error(), "check OPENAI_BASE_URL")
	}
}

func TestEndpointFollowsTheEnvironment(t *testing.T) {
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1")
	m, err := New(Config{})
	require.NoError(t, err)
	assert.Equal(t, "http://127.0.0.1:11434/v1", m.ep.URL)
	t.Setenv("OPENAI_BASE_URL", "")
	m, err = New(Config{})
	require.NoError(t, err)
	assert.Equal(t, DefaultBaseURL, m.ep.URL)
}
