package agentchat

import (
	"context"
	"net/http"

	"github.com/agentwire/agentwire/generated/agentchatapi"
	"github.com/agentwire/agentwire/internal/protocol"
)

// Name is the protocol's name in --listen and the banner.
const Name = "agentchat"

// Registration is agentchat's entry in the server's protocol registry.
var Registration = protocol.Registration{
	Name: Name,
	New:  func(env protocol.Env) (protocol.Adapter, error) { return New(env), nil },
}

var _ protocol.Adapter = (*Handler)(nil)

// Mount implements protocol.Adapter: agentchat is served at /ws, and at
// the root of a listener of its own.
func (h *Handler) Mount(mux *http.ServeMux, own bool) {
	mux.Handle("GET "+agentchatapi.Address, h)
	if own {
		mux.Handle("GET /{$}", h)
	}
}

// Endpoints implements protocol.Adapter.
func (h *Handler) Endpoints() []protocol.Endpoint {
	return []protocol.Endpoint{{Scheme: "ws", Path: agentchatapi.Address}}
}

// Shutdown implements protocol.Adapter: it ends the adapter's thread
// subscriptions and waits for them. The server closes the sockets
// themselves (wsconn.Registry).
func (h *Handler) Shutdown(ctx context.Context) error {
	return h.hub.close(ctx)
}
