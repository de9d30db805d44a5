package server

import (
	"net/http"

	"github.com/oklog/ulid/v2"

	"github.com/agentwire/agentwire/internal/logs"
)

// withConnID gives every request (and so every WebSocket and event
// stream it opens) an id: sent back in the X-Request-Id header and carried
// by the request's context as the "conn" attribute of every line logged
// with it (logs.With).
func withConnID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := ulid.Make().String()
		w.Header().Set("X-Request-Id", id)
		next.ServeHTTP(w, r.WithContext(logs.With(r.Context(), "conn", id)))
	})
}
