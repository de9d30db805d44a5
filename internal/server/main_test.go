package server

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMain fails the package if a server left goroutines behind after its
// Shutdown: socket handlers, hub pumps, subscriptions, runs.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaked := leakedGoroutines(); leaked != "" {
			fmt.Fprintf(os.Stderr, "goroutines left running:\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

func leakedGoroutines() string {
	var stacks []string
	for range 300 { // goroutines that are ending get a moment to end
		stacks = stacks[:0]
		buf := make([]byte, 4<<20)
		buf = buf[:runtime.Stack(buf, true)]
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "agentwire/agentwire/internal") && !strings.Contains(g, "leakedGoroutines") {
				stacks = append(stacks, g)
			}
		}
		if len(stacks) == 0 {
			return ""
		}
		time.Sleep(10 * time.Millisecond)
	}
	return strings.Join(stacks, "\n\n")
}
