package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/store"
	"github.com/agentwire/agentwire/internal/store/internal/groupcommit"
)

var _ store.Runs = (*Store)(nil)

// Leases are timed by the database's clock (now()), which every node
// shares. Each operation is one statement: the row lock of its UPDATE or
// INSERT serialises nodes that act on the same thread at once.

func checkClaim(c store.RunClaim) error {
	if c.Thread == "" || c.Run == "" || c.Node == "" {
		return fmt.Errorf("postgres: run claim: thread, run and node are required, got %+v", c)
	}
	return nil
}

// exec runs a write and reports whether it changed a row.
func (s *Store) exec(ctx context.Context, what, q string, args ...any) (bool, error) {
	if err := s.usable(ctx); err != nil {
		return false, err
	}
	tag, err := s.pool.Exec(ctx, q, args...)
	if err != nil {
		return false, fmt.Errorf("postgres: %s: %w", what, s.closedErr(err))
	}
	return tag.RowsAffected() > 0, nil
}

// ClaimRun implements store.Runs.
func (s *Store) ClaimRun(ctx context.Context, c store.RunClaim, lease time.Duration) error {
	if err := checkClaim(c); err != nil {
		return err
	}
	ok, err := s.exec(ctx, "claim run "+c.Run, `INSERT INTO runs (thread, run, node, since, expires)
		VALUES ($1, $2, $3, now(), now() + $4 * interval '1 microsecond')
		ON CONFLICT (thread) DO NOTHING`, c.Thread, c.Run, c.Node, lease.Microseconds())
	if err == nil && !ok {
		err = store.ErrRunClaimed
	}
	return err
}

// ClaimAndAppend implements store.Runs in a transaction of its own: the
// append lock and the thread's lock as a batch takes them (lockThreads),
// the claim, then the events numbered after the thread's last seq. The
// writer's cached last seq of the thread is marked stale while the
// thread's lock is held, so its next batch of the thread looks it up.
func (s *Store) ClaimAndAppend(ctx context.Context, c store.RunClaim, lease time.Duration, events ...event.Event) ([]event.Event, error) {
	if err := checkClaim(c); err != nil {
		return nil, err
	}
	if err := s.usable(ctx); err != nil {
		return nil, err
	}
	a, err := groupcommit.Prepare(c.Thread, events)
	if err != nil {
		return nil, err
	}
	// As a claim is (exec), and as a write waits for its commit whatever
	// ctx does: the caller must learn whether the claim was taken.
	ctx = context.WithoutCancel(ctx)
	committed, err := s.claimAndAppend(ctx, c, lease, a)
	if err != nil && !errors.Is(err, store.ErrRunClaimed) {
		return nil, fmt.Errorf("postgres: claim run %s and append: %w", c.Run, s.closedErr(err))
	}
	return committed, err
}

func (s *Store) claimAndAppend(ctx context.Context, c store.RunClaim, lease time.Duration, a *groupcommit.Append) ([]event.Event, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(ctx)
	keys, shared := s.lockKeys([]string{c.Thread})
	if _, err := tx.Exec(ctx, lockThreads, keys, shared); err != nil {
		return nil, err
	}
	s.staleMu.Lock()
	s.stale[c.Thread] = true
	s.staleMu.Unlock()
	tag, err := tx.Exec(ctx, `INSERT INTO runs (thread, run, node, since, expires)
		VALUES ($1, $2, $3, now(), now() + $4 * interval '1 microsecond')
		ON CONFLICT (thread) DO NOTHING`, c.Thread, c.Run, c.Node, lease.Microseconds())
	if err != nil {
		return nil, err
	}
	if tag.RowsAffected() == 0 {
		return nil, store.ErrRunClaimed
	}
	if a == nil {
		return nil, tx.Commit(ctx)
	}
	n := len(a.Events)
	tis, pos := make([]int64, n), make([]int64, n)
	ids, runs, types := make([]string, n), make([]string, n), make([]string, n)
	times := make([]time.Time, n)
	for i, e := range a.Events {
		tis[i], pos[i] = 1, int64(i+1)
		ids[i], runs[i], types[i], times[i] = e.ID, e.Run, string(e.Type()), e.Time
	}
	var (
		last   int64
		server time.Time
	)
	if err := tx.QueryRow(ctx, appendEvents, []string{c.Thread}, []int64{-1}, tis, pos, ids, runs, types, times, a.Data,
		time.Time{}, time.Now()).Scan(&last, &server); err != nil {
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, err
	}
	for i := range a.Events {
		a.Events[i].Seq = last + int64(i) + 1
	}
	return a.Events, nil
}

// MoveRun implements store.Runs.
func (s *Store) MoveRun(ctx context.Context, c store.RunClaim, from string, lease time.Duration) error {
	if err := checkClaim(c); err != nil {
		return err
	}
	ok, err := s.exec(ctx, "move run claim to "+c.Run, `UPDATE runs
		SET run = $1, since = now(), expires = now() + $2 * interval '1 microsecond'
		WHERE thread = $3 AND run = $4 AND node = $5`, c.Run, lease.Microseconds(), c.Thread, from, c.Node)
	if err == nil && !ok {
		err = store.ErrRunClaimed
	}
	return err
}

// claimColumns are the columns scanClaims reads, in order; the last one
// says whether the lease has expired.
const claimColumns = `thread, run, node, since, expires, expires < now()`

// RenewRuns implements store.Runs.
func (s *Store) RenewRuns(ctx context.Context, node string, lease time.Duration) ([]store.RunClaim, error) {
	if err := s.usable(ctx); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `UPDATE runs SET expires = now() + $1 * interval '1 microsecond'
		WHERE node = $2 RETURNING `+claimColumns, lease.Microseconds(), node)
	if err != nil {
		return nil, fmt.Errorf("postgres: renew runs of %s: %w", node, s.closedErr(err))
	}
	return s.scanClaims(rows)
}

// TakeOverRun implements store.Runs.
func (s *Store) TakeOverRun(ctx context.Context, c store.RunClaim, node string, lease time.Duration) error {
	ok, err := s.exec(ctx, "take over run "+c.Run, `UPDATE runs
		SET node = $1, since = now(), expires = now() + $2 * interval '1 microsecond'
		WHERE thread = $3 AND run = $4 AND node = $5 AND expires < now()`,
		node, lease.Microseconds(), c.Thread, c.Run, c.Node)
	if err == nil && !ok {
		err = store.ErrRunClaimed
	}
	return err
}

// ReleaseRun implements store.Runs.
func (s *Store) ReleaseRun(ctx context.Context, c store.RunClaim) error {
	_, err := s.exec(ctx, "release run "+c.Run, `DELETE FROM runs WHERE thread = $1 AND run = $2 AND node = $3`,
		c.Thread, c.Run, c.Node)
	return err
}

// ActiveRun implements store.Runs.
func (s *Store) ActiveRun(ctx context.Context, thread string) (store.RunClaim, bool, error) {
	if err := s.usable(ctx); err != nil {
		return store.RunClaim{}, false, err
	}
	rows, err := s.pool.Query(ctx, `SELECT `+claimColumns+` FROM runs WHERE thread = $1`, thread)
	if err != nil {
		return store.RunClaim{}, false, fmt.Errorf("postgres: active run of %q: %w", thread, s.closedErr(err))
	}
	claims, err := s.scanClaims(rows)
	if err != nil || len(claims) == 0 {
		return store.RunClaim{}, false, err
	}
	return claims[0], true, nil
}

// RunClaims implements store.Runs.
func (s *Store) RunClaims(ctx context.Context) ([]store.RunClaim, error) {
	if err := s.usable(ctx); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT `+claimColumns+` FROM runs ORDER BY thread`)
	if err != nil {
		return nil, fmt.Errorf("postgres: run claims: %w", s.closedErr(err))
	}
	return s.scanClaims(rows)
}

func (s *Store) scanClaims(rows pgx.Rows) ([]store.RunClaim, error) {
	var (
		out []store.RunClaim
		c   store.RunClaim
	)
	_, err := pgx.ForEachRow(rows, []any{&c.Thread, &c.Run, &c.Node, &c.Since, &c.Expires, &c.Expired}, func() error {
		c.Since, c.Expires = c.Since.UTC(), c.Expires.UTC()
		out = append(out, c)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: run claims: %w", s.closedErr(err))
	}
	return out, nil
}

// EnqueueInput implements store.Runs.
func (s *Store) EnqueueInput(ctx context.Context, thread string, in store.QueuedInput) error {
	opts, err := json.Marshal(in.Options)
	if err != nil {
		return fmt.Errorf("postgres: enqueue input: %w", err)
	}
	_, err = s.exec(ctx, "enqueue input", `INSERT INTO run_queue (thread, run, message_id, text, interactive, options)
		VALUES ($1, $2, $3, $4, $5, $6)`, thread, in.Run, in.MessageID, in.Text, in.Interactive, string(opts))
	return err
}

// DequeueInput implements store.Runs.
func (s *Store) DequeueInput(ctx context.Context, thread string) (store.QueuedInput, bool, error) {
	if err := s.usable(ctx); err != nil {
		return store.QueuedInput{}, false, err
	}
	var (
		in   store.QueuedInput
		opts []byte
	)
	err := s.pool.QueryRow(ctx, `DELETE FROM run_queue WHERE id = (
			SELECT id FROM run_queue WHERE thread = $1 ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)
		RETURNING run, message_id, text, interactive, options`, thread).
		Scan(&in.Run, &in.MessageID, &in.Text, &in.Interactive, &opts)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.QueuedInput{}, false, nil
	}
	if err != nil {
		return store.QueuedInput{}, false, fmt.Errorf("postgres: dequeue input of %q: %w", thread, s.closedErr(err))
	}
	if err := json.Unmarshal(opts, &in.Options); err != nil {
		return store.QueuedInput{}, false, fmt.Errorf("postgres: dequeue input of %q: options: %w", thread, err)
	}
	return in, true, nil
}

// DropQueue implements store.Runs.
func (s *Store) DropQueue(ctx context.Context, thread string) (int, error) {
	if err := s.usable(ctx); err != nil {
		return 0, err
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM run_queue WHERE thread = $1`, thread)
	if err != nil {
		return 0, fmt.Errorf("postgres: drop the queue of %q: %w", thread, s.closedErr(err))
	}
	return int(tag.RowsAffected()), nil
}

// QueueLen implements store.Runs.
func (s *Store) QueueLen(ctx context.Context, thread string) (int, error) {
	if err := s.usable(ctx); err != nil {
		return 0, err
	}
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM run_queue WHERE thread = $1`, thread).Scan(&n); err != nil {
		return 0, fmt.Errorf("postgres: queue of %q: %w", thread, s.closedErr(err))
	}
	return n, nil
}
