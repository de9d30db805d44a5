package sandbox_test

import (
	"testing"

	"github.com/agentwire/agentwire/internal/leaktest"
	"github.com/agentwire/agentwire/internal/tools/sandbox"
	"github.com/agentwire/agentwire/internal/tools/sandbox/sandboxtest"
)

// TestMain serves as the sandbox's launcher when this binary is
// re-executed as one, gives the process a marker secret in its initial
// environment, and fails the package if a test left goroutines behind.
func TestMain(m *testing.M) {
	sandbox.Main()
	sandboxtest.ReexecWithSecret()
	leaktest.Main(m, "agentwire/agentwire/internal/tools")
}
