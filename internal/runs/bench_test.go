package runs_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/agentwire/agentwire/internal/agent"
	"github.com/agentwire/agentwire/internal/bus/local"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/runs"
	"github.com/agentwire/agentwire/internal/store"
	"github.com/agentwire/agentwire/internal/store/postgres"
	"github.com/agentwire/agentwire/internal/store/sqlite"
)

// instantRunner ends every run at once, as a run that answers in one
// chunk would, so that a benchmark measures starting runs.
type instantRunner struct{}

func (instantRunner) Run(ctx context.Context, spec agent.Spec, j agent.Journal, _ *agent.Inbox) error {
	_, err := j.Append(ctx, event.New(spec.Thread, spec.Run, event.RunCompleted{Reason: "final_answer"}))
	return err
}

// BenchmarkRunStart starts runs on fresh threads through the Manager (the
// thread's claim, its command handler, the user's message, the run's end,
// the release) and, as the baseline, only commits what such a run writes
// (the user's message and the run's end) on SQLite. The ratio is the cost
// of run ownership (docs/BENCHMARKS.md).
func BenchmarkRunStart(b *testing.B) {
	stores := []string{"sqlite"}
	if os.Getenv("AGENTWIRE_TEST_POSTGRES_URL") != "" {
		stores = append(stores, "postgres")
	}
	for _, backend := range stores {
		for _, mode := range []string{"commit-only", "manager"} {
			b.Run(backend+"/"+mode, func(b *testing.B) { benchRunStart(b, backend, mode) })
		}
	}
}

func benchRunStart(b *testing.B, backend, mode string) {
	st := benchStore(b, backend)
	bb := local.New()
	defer bb.Close()
	m := runs.New(runs.Config{Log: &watched{Store: st, changed: make(chan struct{})}, Claims: st, Bus: bb, Runner: instantRunner{}, Node: "bench"})
	defer m.Shutdown(context.Background())
	ctx := context.Background()
	for b.Loop() {
		thread := event.NewID()
		if mode == "commit-only" {
			run := event.NewID()
			if _, err := st.Append(ctx, thread, event.New(thread, run, event.MessageUser{MessageID: event.NewID(), Text: "hi"})); err != nil {
				b.Fatal(err)
			}
			if _, err := st.Append(ctx, thread, event.New(thread, run, event.RunCompleted{Reason: "final_answer"})); err != nil {
				b.Fatal(err)
			}
			continue
		}
		if _, err := m.Post(ctx, thread, runs.Input{Text: "hi"}); err != nil {
			b.Fatal(err)
		}
	}
	// Wait for the last runs to end before the store closes.
	m.Shutdown(ctx)
}

// benchStore opens a fresh store of the backend, closed (and, for
// PostgreSQL, dropped) when the benchmark ends.
func benchStore(b *testing.B, backend string) store.Store {
	b.Helper()
	ctx := context.Background()
	if backend == "sqlite" {
		st, err := sqlite.Open(ctx, sqlite.Options{Dir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = st.Close() })
		return st
	}
	url := os.Getenv("AGENTWIRE_TEST_POSTGRES_URL")
	schema := "runsbench_" + strings.ToLower(event.NewID())
	st, err := postgres.Open(ctx, url, postgres.Options{Schema: schema})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = st.Close()
		if conn, err := pgx.Connect(ctx, url); err == nil {
			_, _ = conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
			_ = conn.Close(ctx)
		}
	})
	return st
}
