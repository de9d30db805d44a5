package server

import (
	"github.com/agentwire/agentwire/internal/protocol"
	"github.com/agentwire/agentwire/internal/protocol/ag2"
	"github.com/agentwire/agentwire/internal/protocol/agentchat"
	"github.com/agentwire/agentwire/internal/protocol/agentloop"
	"github.com/agentwire/agentwire/internal/protocol/loom"
	"github.com/agentwire/agentwire/internal/protocol/threads"
)

// Protocols is the registry: every wire protocol this build serves, in the
// banner's order. A new protocol is its package and one line here; --listen
// names, routes, the banner, readiness and shutdown all read this list.
func Protocols() []protocol.Registration {
	return []protocol.Registration{
		agentchat.Registration,
		threads.Registration,
		agentloop.Registration,
		ag2.Registration,
		loom.Registration,
	}
}
