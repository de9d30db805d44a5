package server

import (
	"testing"

	"github.com/agentwire/agentwire/internal/leaktest"
)

// TestMain fails the package if a server left goroutines behind after its
// Shutdown: socket handlers, hub pumps, subscriptions, runs.
func TestMain(m *testing.M) { leaktest.Main(m, "agentwire/agentwire/internal") }
