package builtin_test

import (
	"testing"

	"github.com/agentwire/agentwire/internal/leaktest"
)

// TestMain fails the package if the tools left goroutines behind (stream
// readers of killed commands, HTTP connections).
func TestMain(m *testing.M) { leaktest.Main(m, "agentwire/agentwire/internal/tools") }
