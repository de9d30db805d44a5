package builtin_test

import (
	"testing"

	"github.com/agentwire/agentwire/internal/leaktest"
	"github.com/agentwire/agentwire/internal/tools/sandbox"
)

// TestMain serves as the sandbox's launcher when the tests re-execute this
// binary as one, and fails the package if the tools left goroutines
// behind (stream readers of killed commands, HTTP connections).
func TestMain(m *testing.M) {
	sandbox.Main()
	leaktest.Main(m, "agentwire/agentwire/internal/tools")
}
