// Package leaktest fails tests whose code left goroutines running after
// they ended: socket handlers, subscriptions, tool processes' readers. Main
// checks a whole test binary once its tests have run; Check checks one test.
// Only goroutines with a frame in the packages named by scope count (or
// created by one), so the standard library's idle connections do not.
package leaktest

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// checkGrace is how long Check gives goroutines that are ending to end.
const checkGrace = 10 * time.Second

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

// Check fails t if, once the test and every cleanup registered after Check
// have run, goroutines whose stack mentions scope are still running that
// were not running when Check was called. Goroutines that are ending get
// ten seconds to end. Call it before starting what the test checks, so that its
// cleanup runs after that is shut down. Goroutines of tests running in
// parallel with t count as t's, so do not use it in parallel tests.
func Check(t testing.TB, scope string) {
	t.Helper()
	check(t, scope, checkGrace)
}

// check is Check with the grace period as a parameter.
func check(t testing.TB, scope string, grace time.Duration) {
	t.Helper()
	existed := make(map[uint64]bool)
	for _, g := range goroutines() {
		if g.id != 0 {
			existed[g.id] = true
		}
	}
	t.Cleanup(func() {
		t.Helper()
		if leaked := leaked(scope, existed, grace); leaked != "" {
			t.Errorf("goroutines left running:\n%s", leaked)
		}
	})
}

// Leaked returns the stacks of the goroutines mentioning scope that are
// still running after wait, or "" once there are none. Goroutines that are
// ending get until wait to end.
func Leaked(scope string, wait time.Duration) string {
	return leaked(scope, nil, wait)
}

// leaked is Leaked, ignoring the goroutines whose ids are in existed.
func leaked(scope string, existed map[uint64]bool, wait time.Duration) string {
	deadline := time.Now().Add(wait)
	for {
		var stacks []string
		for _, g := range goroutines() {
			if !existed[g.id] && strings.Contains(g.stack, scope) {
				stacks = append(stacks, g.stack)
			}
		}
		if len(stacks) == 0 {
			return ""
		}
		if time.Now().After(deadline) {
			return strings.Join(stacks, "\n\n")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// goroutine is one goroutine's id and stack as runtime.Stack prints them.
type goroutine struct {
	id    uint64
	stack string
}

// goroutines returns every goroutine but the calling one.
func goroutines() []goroutine {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var gs []goroutine
	for i, stack := range strings.Split(string(buf), "\n\n") {
		if i == 0 { // the calling goroutine comes first
			continue
		}
		gs = append(gs, goroutine{id: goroutineID(stack), stack: stack})
	}
	return gs
}

// goroutineID reads the id from a stack's "goroutine N [state]:" header,
// or returns 0 (no goroutine's id, so never one that existed) if the header
// does not parse.
func goroutineID(stack string) uint64 {
	rest, ok := strings.CutPrefix(stack, "goroutine ")
	if !ok {
		return 0
	}
	num, _, ok := strings.Cut(rest, " [")
	if !ok {
		return 0
	}
	id, err := strconv.ParseUint(num, 10, 64)
	if err != nil {
		return 0
	}
	return id
}
