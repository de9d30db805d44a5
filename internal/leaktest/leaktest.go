// Package leaktest fails a test binary whose code left goroutines running
// after its tests ended: socket handlers, subscriptions, tool processes'
// readers. Only goroutines with a frame in the packages named by scope
// count, so the standard library's idle connections do not.
package leaktest

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Main runs the tests and then, if they passed, checks for goroutines
// whose stack mentions scope (an import path prefix such as
// "github.com/agentwire/agentwire/internal"). It exits the process, so call
// it as the whole of TestMain.
func Main(m *testing.M, scope string) {
	code := m.Run()
	if code == 0 {
		if leaked := Leaked(scope, 3*time.Second); leaked != "" {
			fmt.Fprintf(os.Stderr, "goroutines left running:\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

// Leaked returns the stacks of the goroutines mentioning scope that are
// still running after wait, or "" once there are none. Goroutines that are
// ending get until wait to end.
func Leaked(scope string, wait time.Duration) string {
	deadline := time.Now().Add(wait)
	for {
		stacks := running(scope)
		if len(stacks) == 0 {
			return ""
		}
		if time.Now().After(deadline) {
			return strings.Join(stacks, "\n\n")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// running returns the stacks of the other goroutines that mention scope.
func running(scope string) []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var stacks []string
	for i, g := range strings.Split(string(buf), "\n\n") {
		if i == 0 { // the calling goroutine comes first
			continue
		}
		if strings.Contains(g, scope) {
			stacks = append(stacks, g)
		}
	}
	return stacks
}
