package server

import (
	"testing"

	"github.com/agentwire/agentwire/internal/leaktest"
	"github.com/agentwire/agentwire/internal/tools/sandbox"
	"github.com/agentwire/agentwire/internal/tools/sandbox/sandboxtest"
)

// TestMain serves as the sandbox's launcher when the server re-executes
// this binary as one, gives the process (the server of every test) a
// marker secret in its initial environment, for the escape tests to look
// for, and fails the package if a server left goroutines behind after its
// Shutdown: socket handlers, hub pumps, subscriptions, runs.
func TestMain(m *testing.M) {
	sandbox.Main()
	sandboxtest.ReexecWithSecret()
	leaktest.Main(m, "agentwire/agentwire/internal")
}
