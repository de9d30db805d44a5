package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/store"
)

var _ store.Runs = (*Store)(nil)

// The claims and the queue are written in the group commit (Store.write),
// beside the events: they share its sync of the disk, and wait for it rather
// than fail with SQLITE_BUSY. Leases are timed by this process's clock, the
// only one writing the file (the data directory is one server's).

func now() int64 { return time.Now().UnixMicro() }

func checkClaim(c store.RunClaim) error {
	if c.Thread == "" || c.Run == "" || c.Node == "" {
		return fmt.Errorf("sqlite: run claim: thread, run and node are required, got %+v", c)
	}
	return nil
}

// exec runs a write and reports whether it changed a row.
func (s *Store) exec(ctx context.Context, what, q string, args ...any) (bool, error) {
	var changed bool
	err := s.write(ctx, func(ctx context.Context, tx wtx) error {
		res, err := tx.ExecContext(ctx, q, args...)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		changed = n > 0
		return err
	})
	if err != nil {
		return false, fmt.Errorf("sqlite: %s: %w", what, s.closedErr(err))
	}
	return changed, nil
}

// ClaimRun implements store.Runs.
func (s *Store) ClaimRun(ctx context.Context, c store.RunClaim, lease time.Duration) error {
	if err := checkClaim(c); err != nil {
		return err
	}
	err := s.write(ctx, claimWrite(c, lease))
	if err != nil && !errors.Is(err, store.ErrRunClaimed) {
		return fmt.Errorf("sqlite: claim run %s: %w", c.Run, s.closedErr(err))
	}
	return err
}

// claimWrite claims c.Thread for c.Run, for lease; it fails with
// store.ErrRunClaimed when the thread has a claim.
func claimWrite(c store.RunClaim, lease time.Duration) write {
	t := now()
	return func(ctx context.Context, tx wtx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO runs (thread, run, node, since, expires) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (thread) DO NOTHING`, c.Thread, c.Run, c.Node, t, t+lease.Microseconds())
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return cmp.Or(err, store.ErrRunClaimed)
		}
		return nil
	}
}

// ClaimAndAppend implements store.Runs: the claim is the guard
// of the append in the group commit, so both are in one transaction.
func (s *Store) ClaimAndAppend(ctx context.Context, c store.RunClaim, lease time.Duration, events ...event.Event) ([]event.Event, error) {
	if err := checkClaim(c); err != nil {
		return nil, err
	}
	if err := s.usable(ctx); err != nil {
		return nil, err
	}
	// Waited for whatever ctx does, as a write is (Store.write): the
	// caller must learn whether the claim was taken.
	committed, err := s.commit.AppendIf(context.WithoutCancel(ctx), c.Thread, events, claimWrite(c, lease))
	if err != nil && !errors.Is(err, store.ErrRunClaimed) {
		return nil, fmt.Errorf("sqlite: claim run %s and append: %w", c.Run, s.closedErr(err))
	}
	return committed, err
}

// MoveRun implements store.Runs.
func (s *Store) MoveRun(ctx context.Context, c store.RunClaim, from string, lease time.Duration) error {
	if err := checkClaim(c); err != nil {
		return err
	}
	t := now()
	ok, err := s.exec(ctx, "move run claim to "+c.Run, `UPDATE runs SET run = ?, since = ?, expires = ?
		WHERE thread = ? AND run = ? AND node = ?`, c.Run, t, t+lease.Microseconds(), c.Thread, from, c.Node)
	if err == nil && !ok {
		err = store.ErrRunClaimed
	}
	return err
}

// RenewRuns implements store.Runs.
func (s *Store) RenewRuns(ctx context.Context, node string, lease time.Duration) ([]store.RunClaim, error) {
	t := now()
	var claims []store.RunClaim
	err := s.write(ctx, func(ctx context.Context, tx wtx) error {
		rows, err := tx.QueryContext(ctx, `UPDATE runs SET expires = ? WHERE node = ?
			RETURNING thread, run, node, since, expires`, t+lease.Microseconds(), node)
		if err != nil {
			return err
		}
		claims, err = scanClaims(rows, t)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: renew runs of %s: %w", node, s.closedErr(err))
	}
	return claims, nil
}

// TakeOverRun implements store.Runs.
func (s *Store) TakeOverRun(ctx context.Context, c store.RunClaim, node string, lease time.Duration) error {
	t := now()
	ok, err := s.exec(ctx, "take over run "+c.Run, `UPDATE runs SET node = ?, since = ?, expires = ?
		WHERE thread = ? AND run = ? AND node = ? AND expires < ?`,
		node, t, t+lease.Microseconds(), c.Thread, c.Run, c.Node, t)
	if err == nil && !ok {
		err = store.ErrRunClaimed
	}
	return err
}

// ReleaseRun implements store.Runs.
func (s *Store) ReleaseRun(ctx context.Context, c store.RunClaim) error {
	_, err := s.exec(ctx, "release run "+c.Run, `DELETE FROM runs WHERE thread = ? AND run = ? AND node = ?`,
		c.Thread, c.Run, c.Node)
	return err
}

// ActiveRun implements store.Runs.
func (s *Store) ActiveRun(ctx context.Context, thread string) (store.RunClaim, bool, error) {
	if err := s.usable(ctx); err != nil {
		return store.RunClaim{}, false, err
	}
	rows, err := s.queryRows(ctx, `SELECT thread, run, node, since, expires FROM runs WHERE thread = ?`, thread)
	if err != nil {
		return store.RunClaim{}, false, fmt.Errorf("sqlite: active run of %q: %w", thread, s.closedErr(err))
	}
	claims, err := scanClaims(rows, now())
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
	rows, err := s.queryRows(ctx, `SELECT thread, run, node, since, expires FROM runs ORDER BY thread`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: run claims: %w", s.closedErr(err))
	}
	return scanClaims(rows, now())
}

// scanClaims reads claim rows, judging their leases at time t.
func scanClaims(rows *sql.Rows, t int64) ([]store.RunClaim, error) {
	defer rows.Close()
	var out []store.RunClaim
	for rows.Next() {
		var c store.RunClaim
		var since, expires int64
		if err := rows.Scan(&c.Thread, &c.Run, &c.Node, &since, &expires); err != nil {
			return nil, fmt.Errorf("sqlite: run claims: %w", err)
		}
		c.Since, c.Expires = time.UnixMicro(since).UTC(), time.UnixMicro(expires).UTC()
		c.Expired = expires < t
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: run claims: %w", err)
	}
	return out, nil
}

// EnqueueInput implements store.Runs.
func (s *Store) EnqueueInput(ctx context.Context, thread string, in store.QueuedInput) error {
	opts, err := json.Marshal(in.Options)
	if err != nil {
		return fmt.Errorf("sqlite: enqueue input: %w", err)
	}
	_, err = s.exec(ctx, "enqueue input", `INSERT INTO run_queue (thread, run, message_id, text, interactive, options)
		VALUES (?, ?, ?, ?, ?, ?)`, thread, in.Run, in.MessageID, in.Text, in.Interactive, string(opts))
	return err
}

// DequeueInput implements store.Runs.
func (s *Store) DequeueInput(ctx context.Context, thread string) (store.QueuedInput, bool, error) {
	var (
		in    store.QueuedInput
		opts  string
		found bool
	)
	err := s.write(ctx, func(ctx context.Context, tx wtx) error {
		err := tx.QueryRowContext(ctx, `DELETE FROM run_queue WHERE id = (
				SELECT id FROM run_queue WHERE thread = ? ORDER BY id LIMIT 1)
			RETURNING run, message_id, text, interactive, options`, thread).
			Scan(&in.Run, &in.MessageID, &in.Text, &in.Interactive, &opts)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		found = err == nil
		return err
	})
	if err == nil && !found {
		return store.QueuedInput{}, false, nil
	}
	if err != nil {
		return store.QueuedInput{}, false, fmt.Errorf("sqlite: dequeue input of %q: %w", thread, s.closedErr(err))
	}
	if err := json.Unmarshal([]byte(opts), &in.Options); err != nil {
		return store.QueuedInput{}, false, fmt.Errorf("sqlite: dequeue input of %q: options: %w", thread, err)
	}
	return in, true, nil
}

// DropQueue implements store.Runs.
func (s *Store) DropQueue(ctx context.Context, thread string) (int, error) {
	var n int64
	err := s.write(ctx, func(ctx context.Context, tx wtx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM run_queue WHERE thread = ?`, thread)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: drop the queue of %q: %w", thread, s.closedErr(err))
	}
	return int(n), nil
}

// QueueLen implements store.Runs.
func (s *Store) QueueLen(ctx context.Context, thread string) (int, error) {
	if err := s.usable(ctx); err != nil {
		return 0, err
	}
	var n int
	if err := s.scanRow(ctx, `SELECT count(*) FROM run_queue WHERE thread = ?`, []any{thread}, &n); err != nil {
		return 0, fmt.Errorf("sqlite: queue of %q: %w", thread, s.closedErr(err))
	}
	return n, nil
}
