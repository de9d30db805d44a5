package ag2

import (
	"context"
	"net/http"

	"github.com/agentwire/agentwire/generated/ag2api"
	"github.com/agentwire/agentwire/internal/protocol"
)

// Name is the protocol's name in --listen and the banner.
const Name = "ag2"

// Registration is AG2's entry in the server's protocol registry.
var Registration = protocol.Registration{
	Name: Name,
	New: func(env protocol.Env) (protocol.Adapter, error) {
		h, err := New(env)
		if err != nil {
			return nil, err
		}
		return h, nil
	},
}

var _ protocol.Adapter = (*Handler)(nil)

// rootAddress is where a listener of AG2's own serves it: the document's
// path without its /ws prefix (the prefixed path works there too).
const rootAddress = "/{workflow}/{enterprise_id}/{chat_id}/{user_id}"

// Mount implements protocol.Adapter: AG2 is served at
// /ws/{workflow}/{enterprise_id}/{chat_id}/{user_id}, and on a listener of
// its own also at /{workflow}/{enterprise_id}/{chat_id}/{user_id}; ChatUI's
// REST calls (schemas/openapi/ag2.yaml) on both.
func (h *Handler) Mount(mux *http.ServeMux, own bool) {
	mux.Handle("GET "+ag2api.Address, h)
	h.mountREST(mux) // ChatUI's REST calls (rest.go)
	if own {
		mux.Handle("GET "+rootAddress, h)
	}
}

// Endpoints implements protocol.Adapter.
func (h *Handler) Endpoints() []protocol.Endpoint {
	return []protocol.Endpoint{{Scheme: "ws", Path: ag2api.Address}}
}

// Shutdown implements protocol.Adapter: it ends every socket's follow of
// its chat and waits for them (until ctx is done). The server closes the
// sockets themselves (wsconn.Registry).
func (h *Handler) Shutdown(ctx context.Context) error {
	return h.streams.Shutdown(ctx, nil)
}
