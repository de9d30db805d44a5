package agent_test

import (
	"os"
	"testing"

	"github.com/agentwire/agentwire/internal/tools/sandbox"
)

// TestMain serves as the sandbox's launcher when the tests' commands
// re-execute this binary as one.
func TestMain(m *testing.M) {
	sandbox.Main()
	os.Exit(m.Run())
}
