package agent_test

import (
	"context"
	"testing"

	"github.com/agentwire/agentwire/internal/agent"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/llm/scripted"
	"github.com/agentwire/agentwire/internal/store/sqlite"
	"github.com/agentwire/agentwire/internal/tools/builtin"
	"github.com/agentwire/agentwire/internal/tools/sandbox"
)

// BenchmarkStrategyRuns runs the built-in demo of each strategy on the
// scripted model (no pacing) and a SQLite store, against react's "list
// files" as the baseline measured in the same run: the cost of a
// strategy's extra model calls, events and (for got) goroutines and stage.
// It reports events and model calls per run.
func BenchmarkStrategyRuns(b *testing.B) {
	for _, tc := range []struct{ strategy, text string }{
		{"react", "list files"},
		{"dup", "demo dup"},
		{"tot", "demo tot"},
		{"got", "demo got"},
		{"got_adaptive", "demo got_adaptive"},
	} {
		b.Run(tc.strategy, func(b *testing.B) {
			st, err := sqlite.Open(b.Context(), sqlite.Options{Dir: b.TempDir(), Synchronous: "NORMAL"})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			root, err := sandbox.Open(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer root.Close()
			tl := builtin.New(root, builtin.Options{})
			model := &recorder{Model: scripted.New(scripted.Default(), scripted.WithPacing(scripted.Pacing{}))}
			a := agent.New(agent.Config{Model: model, Tools: tl})
			events := 0
			for i := 0; b.Loop(); i++ {
				thread := "bench-" + tc.strategy + "-" + event.NewID()
				spec := agent.Spec{Thread: thread, Run: event.NewID(), Input: tc.text, Strategy: tc.strategy}
				ctx := context.Background()
				if _, err := st.Append(ctx, thread, event.New(thread, spec.Run, event.MessageUser{MessageID: event.NewID(), Text: tc.text})); err != nil {
					b.Fatal(err)
				}
				if err := a.Run(ctx, spec, newJournal(st, thread), nil); err != nil {
					b.Fatal(err)
				}
				evs, err := st.Read(ctx, thread, 0, 10000)
				if err != nil {
					b.Fatal(err)
				}
				if evs[len(evs)-1].Type() != event.TypeRunCompleted {
					b.Fatalf("%s ended with %s", tc.strategy, evs[len(evs)-1].Type())
				}
				events += len(evs)
			}
			b.ReportMetric(float64(events)/float64(b.N), "events/run")
			b.ReportMetric(float64(len(model.requests()))/float64(b.N), "calls/run")
		})
	}
}
