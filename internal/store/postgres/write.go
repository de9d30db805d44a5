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

// appendBatch commits a whole batch in one statement, so one round trip and
// one implicit transaction. The events arrive as parallel arrays in batch
// order ($1..$6); per thread:
//
//   - bumped adds the thread's event count to its last_seq (creating the row
//     if needed). The row locks it takes are held to commit, so another
//     server appending to the same thread waits and then continues from the
//     committed last_seq: no seq is handed out twice, and a failed batch
//     gives its seqs back. Rows are locked in id order, so two batches
//     touching the same threads cannot deadlock.
//   - inserted numbers each thread's events up to its new last_seq, in
//     batch order, and inserts them.
//
// It returns each thread's new last_seq, from which flush numbers the
// events the same way.
const appendBatch = `
WITH batch AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::text[])
		WITH ORDINALITY AS b (thread, id, run, type, time, data, ord)
), counts AS (
	SELECT thread, count(*) AS n FROM batch GROUP BY thread
), bumped AS (
	INSERT INTO threads AS t (id, last_seq, created, updated)
	SELECT thread, n, $7, $7 FROM counts ORDER BY thread COLLATE "C"
	ON CONFLICT (id) DO UPDATE SET last_seq = t.last_seq + excluded.last_seq, updated = excluded.updated
	RETURNING id, last_seq
), inserted AS (
	INSERT INTO events (thread, seq, id, run, type, time, data)
	SELECT b.thread, bumped.last_seq - c.n + row_number() OVER (PARTITION BY b.thread ORDER BY b.ord),
		b.id, b.run, b.type, b.time, b.data::json
	FROM batch b JOIN counts c USING (thread) JOIN bumped ON bumped.id = b.thread
)
SELECT id, last_seq FROM bumped`

// flush commits one batch and numbers its events.
func (s *Store) flush(ctx context.Context, batch []*groupcommit.Append) error {
	n := 0
	counts := map[string]int64{}
	for _, a := range batch {
		n += len(a.Events)
		counts[a.Thread] += int64(len(a.Events))
	}
	threads, ids, runs, types, data := make([]string, 0, n), make([]string, 0, n), make([]string, 0, n), make([]string, 0, n), make([]string, 0, n)
	times := make([]time.Time, 0, n)
	for _, a := range batch {
		for i, e := range a.Events {
			threads = append(threads, a.Thread)
			ids = append(ids, e.ID)
			runs = append(runs, e.Run)
			types = append(types, string(e.Type()))
			times = append(times, e.Time)
			data = append(data, string(a.Data[i]))
		}
	}
	next := make(map[string]int64, len(counts))
	for attempt := 1; ; attempt++ {
		clear(next)
		rows, err := s.pool.Query(ctx, appendBatch, threads, ids, runs, types, times, data, time.Now())
		if err == nil {
			var (
				id   string
				last int64
			)
			_, err = pgx.ForEachRow(rows, []any{&id, &last}, func() error {
				next[id] = last - counts[id] + 1
				return nil
			})
		}
		if err == nil {
			break
		}
		if attempt == maxAttempts || !retryable(err) {
			return err
		}
		s.log.Warn("postgres: retrying append batch", "attempt", attempt, "err", err)
	}
	if len(next) != len(counts) {
		return fmt.Errorf("reserved seqs for %d of %d threads", len(next), len(counts))
	}
	for _, a := range batch {
		for i := range a.Events {
			a.Events[i].Seq = next[a.Thread]
			next[a.Thread]++
		}
	}
	return nil
}

// maxAttempts bounds retries of a batch that lost a deadlock or
// serialization race (neither should happen given the lock order; this is
// the safety net). Both abort the statement, so nothing of it committed.
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
