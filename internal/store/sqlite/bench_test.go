package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentwire/agentwire/internal/store/sqlite"
	"github.com/agentwire/agentwire/internal/store/storetest"
)

// rawTable is the baseline's plain table: the events table's shape, nothing
// else (no threads table, no seq bookkeeping).
const rawTable = `CREATE TABLE IF NOT EXISTS raw_events (
	thread TEXT NOT NULL, seq INTEGER NOT NULL, id TEXT NOT NULL, run TEXT NOT NULL,
	type TEXT NOT NULL, time INTEGER NOT NULL, data TEXT NOT NULL,
	PRIMARY KEY (thread, seq)
) STRICT, WITHOUT ROWID`

// rawDB opens the store's file the way a plain program would, with the
// same journal and synchronous settings as the store.
func rawDB(b *testing.B, path, synchronous string) *sql.DB {
	db, err := sql.Open("sqlite", path+"?_journal_mode=WAL&_busy_timeout=10000&_synchronous="+synchronous)
	if err != nil {
		b.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	b.Cleanup(func() { db.Close() })
	return db
}

// rawInserter returns the append baseline: each call one transaction of
// multi-row INSERTs (32, 8 and 1 rows per statement, as the store's writer
// uses), prepared once.
func rawInserter(b *testing.B, db *sql.DB) func(context.Context, []storetest.Row) error {
	stmts := map[int]*sql.Stmt{}
	for _, n := range []int{32, 8, 1} {
		st, err := db.Prepare(`INSERT INTO raw_events VALUES ` +
			strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?, ?, ?), ", n), ", "))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
		stmts[n] = st
	}
	return func(ctx context.Context, rows []storetest.Row) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		for _, n := range []int{32, 8, 1} {
			st := tx.StmtContext(ctx, stmts[n])
			for len(rows) >= n {
				args := make([]any, 0, 7*n)
				for _, r := range rows[:n] {
					args = append(args, r.Thread, r.Seq, r.ID, r.Run, r.Type, r.Time.UnixMicro(), string(r.Data))
				}
				if _, err := st.ExecContext(ctx, args...); err != nil {
					return err
				}
				rows = rows[n:]
			}
		}
		return tx.Commit()
	}
}

func BenchmarkAppend(b *testing.B) {
	for _, sync := range []string{"FULL", "NORMAL"} {
		b.Run("sync="+sync, func(b *testing.B) {
			dir := b.TempDir()
			s, err := sqlite.Open(b.Context(), sqlite.Options{Dir: dir, Synchronous: sync})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			db := rawDB(b, s.Path(), sync)
			if _, err := db.Exec(rawTable); err != nil {
				b.Fatal(err)
			}
			storetest.BenchAppend(b, s, rawInserter(b, db))
		})
	}
}

// bigLog is the million-event log BenchmarkReplay reads, built once per run
// of the test binary in a temporary directory that TestMain removes.
var bigLog struct {
	once sync.Once
	dir  string
	err  error
}

func bigLogDir(b *testing.B) string {
	bigLog.once.Do(func() {
		bigLog.dir, bigLog.err = os.MkdirTemp("", "agentwire-sqlite-bench-")
		if bigLog.err != nil {
			return
		}
		// NORMAL: the big log is benchmark input, not data to keep.
		s, err := sqlite.Open(context.Background(), sqlite.Options{Dir: bigLog.dir, Synchronous: "NORMAL"})
		if err != nil {
			bigLog.err = err
			return
		}
		bigLog.err = storetest.FillBig(context.Background(), s)
		if err := s.Close(); bigLog.err == nil {
			bigLog.err = err
		}
	})
	if bigLog.err != nil {
		b.Fatalf("building the big log: %v", bigLog.err)
	}
	return bigLog.dir
}

func cleanupBench() {
	if bigLog.dir != "" {
		os.RemoveAll(bigLog.dir)
	}
}

func BenchmarkReplay(b *testing.B) {
	dir := bigLogDir(b)
	s, err := sqlite.Open(b.Context(), sqlite.Options{Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if last, err := s.LastSeq(b.Context(), storetest.BigThread(0)); err != nil || last != storetest.ReplayEvents {
		b.Fatalf("big log thread has %d events (%v)", last, err)
	}
	db := rawDB(b, filepath.Join(dir, sqlite.FileName), "FULL")
	storetest.BenchReplay(b, s, storetest.BigThread(42), func(ctx context.Context, thread string, limit int, row func(string, []byte) error) (int, error) {
		rows, err := db.QueryContext(ctx, `SELECT seq, id, run, type, time, data FROM events
			WHERE thread = ? AND seq > 0 ORDER BY seq LIMIT ?`, thread, limit)
		if err != nil {
			return 0, err
		}
		defer rows.Close()
		var (
			n            int
			seq, us      int64
			id, run, typ string
			data         sql.RawBytes
		)
		for rows.Next() {
			if err := rows.Scan(&seq, &id, &run, &typ, &us, &data); err != nil {
				return 0, err
			}
			if err := row(typ, data); err != nil {
				return 0, err
			}
			n++
		}
		if err := rows.Err(); err != nil {
			return 0, fmt.Errorf("raw select: %w", err)
		}
		return n, nil
	})
}

func BenchmarkSpent(b *testing.B) {
	for _, threads := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("threads=%d", threads), func(b *testing.B) {
			s, err := sqlite.Open(b.Context(), sqlite.Options{Dir: b.TempDir(), Synchronous: "NORMAL"})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			storetest.BenchSpent(b, s, threads)
		})
	}
}
