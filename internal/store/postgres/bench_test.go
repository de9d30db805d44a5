package postgres_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/store/postgres"
	"github.com/agentwire/agentwire/internal/store/storetest"
)

// rawPool connects to the test database with schema first in search_path,
// as a plain program would.
func rawPool(b *testing.B, schema string) *pgxpool.Pool {
	cfg, err := pgxpool.ParseConfig(dbURL(b))
	if err != nil {
		b.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{schema}.Sanitize()
	pool, err := pgxpool.NewWithConfig(b.Context(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	return pool
}

func BenchmarkAppend(b *testing.B) {
	schema := newSchema(b)
	s, err := postgres.Open(b.Context(), dbURL(b), postgres.Options{Schema: schema})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	pool := rawPool(b, schema)
	// The baseline's plain table: the events table's shape, nothing else.
	if _, err := pool.Exec(b.Context(), `CREATE TABLE raw_events (LIKE events INCLUDING ALL)`); err != nil {
		b.Fatal(err)
	}
	cols := []string{"thread", "seq", "id", "run", "type", "time", "data"}
	storetest.BenchAppend(b, s, func(ctx context.Context, rows []storetest.Row) error {
		// One transaction per batch, the rows sent with COPY: the fastest
		// plain way to insert a batch, and the way the store's writer does.
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			_, err := tx.CopyFrom(ctx, pgx.Identifier{"raw_events"}, cols, pgx.CopyFromSlice(len(rows), func(i int) ([]any, error) {
				r := rows[i]
				return []any{r.Thread, r.Seq, r.ID, r.Run, r.Type, r.Time, r.Data}, nil
			}))
			return err
		})
	})
}

// bigLog is the million-event log BenchmarkReplay reads, built once per run
// of the test binary in a schema of its own that TestMain drops.
var bigLog struct {
	once   sync.Once
	schema string
	err    error
}

func bigLogSchema(b *testing.B) string {
	url := dbURL(b)
	bigLog.once.Do(func() {
		bigLog.schema = "storebench_" + strings.ToLower(event.NewID())
		s, err := postgres.Open(context.Background(), url, postgres.Options{Schema: bigLog.schema})
		if err != nil {
			bigLog.err = err
			return
		}
		bigLog.err = storetest.FillBig(context.Background(), s)
		if err := s.Close(); bigLog.err == nil {
			bigLog.err = err
		}
		if bigLog.err == nil {
			// What autovacuum would do soon after: fresh statistics and a
			// visibility map, for the store and the baseline alike.
			conn, err := pgx.Connect(context.Background(), url)
			if err != nil {
				bigLog.err = err
				return
			}
			defer conn.Close(context.Background())
			_, bigLog.err = conn.Exec(context.Background(), `VACUUM ANALYZE `+pgx.Identifier{bigLog.schema, "events"}.Sanitize())
		}
	})
	if bigLog.err != nil {
		b.Fatalf("building the big log: %v", bigLog.err)
	}
	return bigLog.schema
}

func cleanupBench() {
	if bigLog.schema == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, os.Getenv(urlEnv))
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	_, _ = conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{bigLog.schema}.Sanitize()+` CASCADE`)
}

func BenchmarkReplay(b *testing.B) {
	schema := bigLogSchema(b)
	s, err := postgres.Open(b.Context(), dbURL(b), postgres.Options{Schema: schema})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if last, err := s.LastSeq(b.Context(), storetest.BigThread(0)); err != nil || last != storetest.ReplayEvents {
		b.Fatalf("big log thread has %d events (%v)", last, err)
	}
	pool := rawPool(b, schema)
	storetest.BenchReplay(b, s, storetest.BigThread(42), func(ctx context.Context, thread string, limit int, row func(string, []byte) error) (int, error) {
		rows, err := pool.Query(ctx, `SELECT seq, id, run, type, time, data FROM events
			WHERE thread = $1 AND seq > 0 ORDER BY seq LIMIT $2`, thread, limit)
		if err != nil {
			return 0, err
		}
		var (
			seq          int64
			id, run, typ string
			tm           time.Time
			data         []byte
		)
		n := 0
		_, err = pgx.ForEachRow(rows, []any{&seq, &id, &run, &typ, &tm, &data}, func() error {
			n++
			return row(typ, data)
		})
		return n, err
	})
}

func BenchmarkSpent(b *testing.B) {
	for _, threads := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("threads=%d", threads), func(b *testing.B) {
			s, err := postgres.Open(b.Context(), dbURL(b), postgres.Options{Schema: newSchema(b)})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			storetest.BenchSpent(b, s, threads)
		})
	}
}
