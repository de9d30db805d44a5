package loom

import (
	"context"
	"net/http"
	"strings"

	"github.com/agentwire/agentwire/generated/loomapi"
	"github.com/agentwire/agentwire/internal/protocol"
)

// Name is the protocol's name in --listen and the banner.
const Name = "loom"

// Registration is Loom's entry in the server's protocol registry.
var Registration = protocol.Registration{
	Name: Name,
	New:  func(env protocol.Env) (protocol.Adapter, error) { return New(env) },
}

var _ protocol.Adapter = (*Handler)(nil)

// Mount implements protocol.Adapter: Loom is served at /loom; at / (the
// route of `loom serve`) it takes WebSocket upgrade requests and answers
// 404 to every other request (the server's main listener serves its
// playground page there before this route sees a plain GET); on a
// listener of its own it is served at the root.
func (h *Handler) Mount(mux *http.ServeMux, own bool) {
	mux.Handle("GET "+loomapi.Address, h)
	if own {
		mux.Handle("GET /{$}", h)
		return
	}
	mux.Handle("GET /{$}", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isUpgrade(r) {
			http.NotFound(w, r)
			return
		}
		h.ServeHTTP(w, r)
	}))
}

// isUpgrade reports whether r asks to upgrade to a WebSocket.
func isUpgrade(r *http.Request) bool {
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		return false
	}
	for _, v := range r.Header.Values("Connection") {
		for tok := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), "upgrade") {
				return true
			}
		}
	}
	return false
}

// Endpoints implements protocol.Adapter.
func (h *Handler) Endpoints() []protocol.Endpoint {
	return []protocol.Endpoint{{Scheme: "ws", Path: loomapi.Address}, {Scheme: "ws", Path: "/"}}
}

// Shutdown implements protocol.Adapter: it ends every connection's stream
// of its runs and waits for them (until ctx is done). The server closes
// the sockets themselves (wsconn.Registry) and the working folder; the
// runs go on in the core.
func (h *Handler) Shutdown(ctx context.Context) error {
	return h.workers.Shutdown(ctx, nil)
}
