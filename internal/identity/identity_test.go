package identity_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/identity"
)

// echoPrincipal answers the principal its request's context carries.
var echoPrincipal = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	_, _ = io.WriteString(w, identity.FromContext(r.Context()).ID)
})

func get(t *testing.T, h http.Handler, header string) (int, string) {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	if header != "" {
		req.Header.Set("Authorization", header)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func TestNoneMakesEveryRequestAnonymous(t *testing.T) {
	code, body := get(t, identity.Middleware(identity.None, echoPrincipal), "Bearer whatever")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "anonymous", body)
	assert.True(t, identity.FromContext(t.Context()).IsAnonymous(), "a context without a principal is anonymous's")
}

func TestMiddlewarePassesThePrincipalOrRefuses(t *testing.T) {
	keys := identity.AuthenticatorFunc(func(r *http.Request) (identity.Principal, error) {
		if r.Header.Get("Authorization") == "Bearer k1" {
			return identity.Principal{ID: "ada"}, nil
		}
		return identity.Principal{}, fmt.Errorf("%w: unknown key", identity.ErrUnauthenticated)
	})
	h := identity.Middleware(keys, echoPrincipal)
	code, body := get(t, h, "Bearer k1")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ada", body)
	code, body = get(t, h, "Bearer nope")
	assert.Equal(t, http.StatusUnauthorized, code)
	assert.NotContains(t, body, "nope", "the refusal does not echo the credentials")
}
