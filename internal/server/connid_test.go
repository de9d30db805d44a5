package server

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/logs"
)

// Every request gets its own id, in the X-Request-Id header and on every
// line logged with its context.
func TestConnIDInHeaderAndLog(t *testing.T) {
	var out bytes.Buffer
	log, err := logs.New(&out, "text", logs.ParseLevel("info"))
	require.NoError(t, err)
	srv := httptest.NewServer(withConnID(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.InfoContext(r.Context(), "served")
	})))
	defer srv.Close()

	ids := map[string]bool{}
	for range 2 {
		resp, err := http.Get(srv.URL)
		require.NoError(t, err)
		resp.Body.Close()
		id := resp.Header.Get("X-Request-Id")
		require.Len(t, id, 26, "a ULID")
		assert.Contains(t, out.String(), "msg=served conn="+id)
		ids[id] = true
	}
	assert.Len(t, ids, 2, "each request has its own id")
}
