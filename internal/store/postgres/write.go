package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentwire/agentwire/internal/store/internal/groupcommit"
)

// bumpThreads reserves seqs: it adds each thread's event count to its
// last_seq (creating the row if needed) and returns the new last_seq. The
// row locks it takes are held to commit, so another server appending to the
// same thread waits and then continues from the committed last_seq: no seq
// is handed out twice, and a rolled-back batch gives its seqs back. Rows are
// locked in id order, so two batches touching the same threads cannot
// deadlock.
const bumpThreads = `
INSERT INTO threads AS t (id, last_seq, created, updated)
SELECT id, n, $3, $3 FROM unnest($1::text[], $2::bigint[]) AS u (id, n) ORDER BY id COLLATE "C"
ON CONFLICT (id) DO UPDATE SET last_seq = t.last_seq + excluded.last_seq, updated = excluded.updated
RETURNING id, last_seq`

var eventColumns = []string{"thread", "seq", "id", "run", "type", "time", "data"}

// flush commits one batch in one transaction: reserve seqs, then COPY the
// events in.
func (s *Store) flush(ctx context.Context, batch []*groupcommit.Append) error {
	counts := map[string]int64{}
	total := 0
	for _, a := range batch {
		counts[a.Thread] += int64(len(a.Events))
		total += len(a.Events)
	}
	threads := make([]string, 0, len(counts))
	ns := make([]int64, 0, len(counts))
	for th, n := range counts {
		threads = append(threads, th)
		ns = append(ns, n)
	}
	rows := make([][]any, 0, total)
	for attempt := 1; ; attempt++ {
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			next := make(map[string]int64, len(counts))
			res, err := tx.Query(ctx, bumpThreads, threads, ns, time.Now())
			if err != nil {
				return fmt.Errorf("reserve seqs: %w", err)
			}
			var (
				id   string
				last int64
			)
			_, err = pgx.ForEachRow(res, []any{&id, &last}, func() error {
				next[id] = last - counts[id] + 1
				return nil
			})
			if err != nil {
				return fmt.Errorf("reserve seqs: %w", err)
			}
			rows = rows[:0]
			for _, a := range batch {
				for i := range a.Events {
					e := &a.Events[i]
					e.Seq = next[a.Thread]
					next[a.Thread]++
					rows = append(rows, []any{a.Thread, e.Seq, e.ID, e.Run, string(e.Type()), e.Time, a.Data[i]})
				}
			}
			if _, err := tx.CopyFrom(ctx, pgx.Identifier{"events"}, eventColumns, pgx.CopyFromRows(rows)); err != nil {
				return fmt.Errorf("insert events: %w", err)
			}
			return nil
		})
		if err == nil || attempt == maxAttempts || !retryable(err) {
			return err
		}
		s.log.Warn("postgres: retrying append batch", "attempt", attempt, "err", err)
	}
}

// maxAttempts bounds retries of a batch that lost a deadlock or
// serialization race (neither should happen given the lock order; this is
// the safety net).
const maxAttempts = 3

func retryable(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case "40001", "40P01": // serialization_failure, deadlock_detected
		return true
	}
	return false
}
