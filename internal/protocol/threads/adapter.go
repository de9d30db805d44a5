package threads

import (
	"bytes"
	"net/http"

	"github.com/agentwire/agentwire/internal/protocol"
	"github.com/agentwire/agentwire/internal/sse"
)

// Name is the protocol's name in --listen and the banner.
const Name = "threads"

// Registration is the threads protocol's entry in the server's protocol
// registry.
var Registration = protocol.Registration{
	Name: Name,
	New: func(env protocol.Env) (protocol.Adapter, error) {
		opts := Options{Heartbeat: env.Heartbeat, Logger: env.Logger, Metrics: env.Metrics}
		return newHandler(env.Core, opts, env.Verifier(Name, verifyEvent)), nil
	},
}

var _ protocol.Adapter = (*Handler)(nil)

// Mount implements protocol.Adapter. The protocol's paths are absolute, so
// a listener of its own serves them as the main one does.
func (h *Handler) Mount(mux *http.ServeMux, own bool) {
	mux.Handle(PathThread, h)
	mux.Handle(PathEvents, h)
}

// Endpoints implements protocol.Adapter.
func (h *Handler) Endpoints() []protocol.Endpoint {
	return []protocol.Endpoint{{Scheme: "http", Path: PathThread}}
}

// verifyEvent checks one Server-Sent Event as written on the wire against
// the document: it reads it back and decodes it as a client would.
func verifyEvent(frame []byte) error {
	e, err := sse.NewReader(bytes.NewReader(frame)).Next()
	if err != nil {
		return err
	}
	_, err = DecodeEvent(e)
	return err
}
