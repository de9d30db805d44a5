package agentloop

import (
	"context"
	"net/http"

	"github.com/agentwire/agentwire/generated/agentloopapi"
	"github.com/agentwire/agentwire/internal/protocol"
)

// Name is the protocol's name in --listen and the banner.
const Name = "agentloop"

// Registration is AgentLoop's entry in the server's protocol registry.
var Registration = protocol.Registration{
	Name: Name,
	New:  func(env protocol.Env) (protocol.Adapter, error) { return New(env), nil },
}

var _ protocol.Adapter = (*Handler)(nil)

// Mount implements protocol.Adapter: AgentLoop is served at /agentloop,
// and at the root of a listener of its own.
func (h *Handler) Mount(mux *http.ServeMux, own bool) {
	mux.Handle("GET "+agentloopapi.Address, h)
	if own {
		mux.Handle("GET /{$}", h)
	}
}

// Endpoints implements protocol.Adapter.
func (h *Handler) Endpoints() []protocol.Endpoint {
	return []protocol.Endpoint{{Scheme: "ws", Path: agentloopapi.Address}}
}

// Shutdown implements protocol.Adapter: it ends every connection's follow
// of its thread and waits for them (until ctx is done). The server closes
// the sockets themselves (wsconn.Registry).
func (h *Handler) Shutdown(ctx context.Context) error {
	return h.streams.Shutdown(ctx, nil)
}
