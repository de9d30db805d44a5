package llm_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/llm"
)

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

func TestExplainSaysWhatToChange(t *testing.T) {
	openai := llm.Endpoint{Provider: "openai", Model: "gpt-4o-mini", URL: "http://127.0.0.1:9/v1", URLVar: "OPENAI_BASE_URL", KeyVar: "OPENAI_API_KEY"}
	anthropic := llm.Endpoint{Provider: "anthropic", Model: "claude-x", URL: "https://api.anthropic.com", KeyVar: "ANTHROPIC_API_KEY"}

	// A real refused connection, as a client's Post returns it.
	_, dialErr := http.Get("http://" + closedAddr(t) + "/v1/chat/completions")
	require.Error(t, dialErr)

	api := func(status int, msg string) error {
		return fmt.Errorf("POST: %w", &llm.APIError{Provider: "openai", StatusCode: status, Message: msg, Err: errors.New("raw")})
	}
	for _, tc := range []struct {
		name string
		ep   llm.Endpoint
		err  error
		// want are the parts the message must hold.
		want []string
	}{
		{"unreachable, with a URL variable", openai, dialErr,
			[]string{`openai model "gpt-4o-mini" at http://127.0.0.1:9/v1 cannot be reached`, "connection refused", "check OPENAI_BASE_URL"}},
		{"unreachable, no URL variable", anthropic, dialErr,
			[]string{`anthropic model "claude-x" at https://api.anthropic.com cannot be reached`, "network"}},
		{"key refused", openai, api(401, "Incorrect API key provided"),
			[]string{"refused the API key (401 Incorrect API key provided)", "set a valid key in OPENAI_API_KEY", "OPENAI_BASE_URL names the server"}},
		{"forbidden, no URL variable", anthropic, api(403, ""),
			[]string{"refused the API key (403 Forbidden)", "ANTHROPIC_API_KEY"}},
		{"no such model", openai, api(404, "model not found"),
			[]string{`has no model "gpt-4o-mini"`, "check --model", "OPENAI_BASE_URL"}},
		{"rate limited", openai, api(429, "slow down"), []string{"is limiting requests (429 slow down)", "quota"}},
		{"server error", openai, api(503, "overloaded"), []string{"failed (503 overloaded)", "try again"}},
		{"bad request", openai, api(400, "unknown field"), []string{"refused the request (400 unknown field)", "check --model"}},
		{"anything else", openai, errors.New("tls: bad certificate"), []string{"failed: tls: bad certificate"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := llm.Explain(tc.ep, tc.err)
			ce, ok := errors.AsType[*llm.CallError](err)
			require.True(t, ok, "%v is a *CallError", err)
			assert.Equal(t, tc.ep, ce.Endpoint)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.ErrorIs(t, err, tc.err, "the cause stays reachable")
		})
	}

	t.Run("the caller's cancellation is not a model failure", func(t *testing.T) {
		assert.Equal(t, context.Canceled, llm.Explain(openai, context.Canceled))
		wrapped := fmt.Errorf("post: %w", context.DeadlineExceeded)
		assert.Equal(t, wrapped, llm.Explain(openai, wrapped))
	})
	t.Run("explained once", func(t *testing.T) {
		again := fmt.Errorf("again: %w", llm.Explain(openai, dialErr))
		assert.Equal(t, again, llm.Explain(anthropic, again))
	})
	assert.NoError(t, llm.Explain(openai, nil))
}
