package protocol

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/agentwire/agentwire/internal/metrics"
	"github.com/agentwire/agentwire/internal/protocol/wsconn"
	"github.com/agentwire/agentwire/internal/tools"
	"github.com/agentwire/agentwire/internal/tools/sandbox"
	"github.com/agentwire/agentwire/internal/workflow"
)

// Adapter is one wire protocol as the server serves it.
type Adapter interface {
	// Mount registers the protocol's handlers on mux: at its paths on the
	// main listener, or, when own is set, on a listener that serves only
	// this protocol, where it is also served at the root.
	Mount(mux *http.ServeMux, own bool)
	// Endpoints are where the protocol is served on the main listener, for
	// the start-up banner.
	Endpoints() []Endpoint
	// Shutdown ends the adapter's streams and subscriptions and refuses new
	// ones. The server calls it after the runs have stopped, so streams
	// deliver their runs' ends first; what is still open when ctx ends is
	// cut off.
	Shutdown(ctx context.Context) error
}

// Endpoint is a place a protocol is served.
type Endpoint struct {
	Scheme string // "ws" or "http"
	Path   string // e.g. "/ws"
}

// Registration names a protocol and builds its adapter. The server's
// registry is a list of them; a protocol is its package and one line there.
type Registration struct {
	// Name is the protocol's name in --listen and in the banner.
	Name string
	// New builds the adapter.
	New func(env Env) (Adapter, error)
}

// Env is what an adapter is built with: everything it reads of the
// server's set-up, built once by the server. Adapters read no
// configuration of their own.
type Env struct {
	Core Core
	// Model is the name of the model runs use, and ContextWindow its
	// context window in tokens (--context-window, or the model's).
	Model         string
	ContextWindow int
	// Workdir is the server's working folder (the server closes it), and
	// Tools the tools a run gets there under the approval policy, sorted
	// by name.
	Workdir *sandbox.Root
	Tools   []tools.Spec
	// Agentchat and AG2 are those protocols' settings.
	Agentchat AgentchatSettings
	AG2       AG2Settings
	Loom      LoomSettings
	// Conns tracks the server's WebSockets, which Shutdown closes with
	// "going away"; Conn tunes each of them.
	Conns *wsconn.Registry
	Conn  wsconn.Options
	// Heartbeat is the keep-alive interval of event streams (0: the
	// adapter's default).
	Heartbeat time.Duration
	Logger    *slog.Logger
	// Workflows are the multi-agent workflows the server offers, for a
	// protocol that names one per conversation to check it up front
	// (Lookup: workflow.ErrNotFound, or a *workflow.LoadError). Runs
	// resolve RunOptions.Workflow themselves.
	Workflows *workflow.Catalog
	// Verify, when set (in tests), is given every frame the adapter sends
	// with its protocol's verdict on it (nil: valid), so that a projection
	// that drifts from the schema documents fails a test. The WebSocket
	// adapters give it each frame once, when they encode it: a frame that
	// several sockets of a thread share (SharedFrames, agentchat's hub) is
	// given once however many are sent it. Threads gives it every event
	// it writes.
	Verify func(proto string, frame []byte, err error)
	// Metrics counts connections, frames and slow consumers; nil counts
	// nothing.
	Metrics *metrics.Metrics
}

// AgentchatSettings are agentchat's settings.
type AgentchatSettings struct {
	// Stream is how a socket gets the agent's text unless it asks:
	// "message" (the default) or "chunks" (--agentchat-stream).
	Stream string
	// Broadcast sends every socket every thread its principal watches,
	// not only its session's (--agentchat-broadcast all).
	Broadcast bool
}

// AG2Settings are AG2's settings.
type AG2Settings struct {
	// Rate and Burst are the token bucket of the client messages of a
	// socket and of a user: messages a second (0: no limit), and how many
	// at once before Rate applies (at least 1).
	Rate  float64
	Burst int
	// LegacyTypes also sends the legacy un-namespaced duplicate of every
	// chat.* frame.
	LegacyTypes bool
	// Prices is the path of a YAML price table for usage costs; "": the
	// built-in one.
	Prices string
	// TextTurns makes text sent without a request id always a new turn
	// (--ag2-text-turns); by default it answers the pending request.
	TextTurns bool
	// ResumeAfterSeq makes a socket's first client.resume replay only the
	// frames after its lastClientIndex (--ag2-resume=after-seq); by
	// default it replays the chat's transcript from the start.
	ResumeAfterSeq bool
}

// LoomSettings are Loom's settings.
type LoomSettings struct {
	// RunStart sends the document's run_start event (--loom-run-start).
	RunStart bool
}

// ConnOptions are the options of proto's WebSockets: the server's, with
// the adapter's logger, and counted under proto's name.
func (env Env) ConnOptions(proto string, log *slog.Logger) wsconn.Options {
	o := env.Conn
	o.Logger, o.Metrics, o.Protocol = log, env.Metrics, proto
	return o
}

// Verifier returns the function an adapter of proto calls on each frame it
// sends: validate's verdict goes to env.Verify. It returns nil when
// env.Verify is nil, so production servers validate nothing twice.
func (env Env) Verifier(proto string, validate func(frame []byte) error) func(frame []byte) {
	if env.Verify == nil {
		return nil
	}
	return func(frame []byte) { env.Verify(proto, frame, validate(frame)) }
}
