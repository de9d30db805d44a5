package sandbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentwire/agentwire/internal/tools/sandbox"
	"github.com/agentwire/agentwire/internal/tools/sandbox/sandboxtest"
)

// BenchmarkStart measures what the sandbox adds to running a command:
// each iteration starts /bin/true and waits for it, once unconfined (a
// plain fork and exec, the baseline, as with --sandbox off) and once in
// the sandbox at the level, and reports both times and their ratio. The
// two alternate, so that both see the same machine.
func BenchmarkStart(b *testing.B) {
	box := sandboxtest.New(b, sandbox.Config{})
	dir := b.TempDir()
	run := func(b *testing.B, box *sandbox.Sandbox, level sandbox.Level) time.Duration {
		start := time.Now()
		cmd, err := box.Command(context.Background(), level, sandbox.Request{Dir: dir, Argv: []string{"/bin/true"}})
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	for _, level := range []sandbox.Level{sandbox.ReadOnly, sandbox.WorkspaceWrite} {
		b.Run(level.String(), func(b *testing.B) {
			var plain, sandboxed time.Duration
			for b.Loop() {
				plain += run(b, sandbox.Off(), level)
				sandboxed += run(b, box, level)
			}
			n := float64(b.N)
			b.ReportMetric(float64(plain.Microseconds())/n, "plain-µs/op")
			b.ReportMetric(float64(sandboxed.Microseconds())/n, "sandboxed-µs/op")
			b.ReportMetric(float64(sandboxed)/float64(plain), "ratio")
		})
	}
}
