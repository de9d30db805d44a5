package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/agentwire/agentwire/internal/store/internal/groupcommit"
)

// flush commits one batch of appends in one transaction on the write
// connection. Each thread's next seq comes from its threads row, bumped in the
// same transaction, so seqs stay gapless even if another process appends to
// the same file: BEGIN IMMEDIATE holds the write lock from the start.
func (s *Store) flush(ctx context.Context, batch []*groupcommit.Append) error {
	tx, err := s.wconn.BeginTx(ctx, nil) // BEGIN IMMEDIATE (see dsn)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	bump, err := tx.PrepareContext(ctx, `INSERT INTO threads (id, last_seq, created, updated) VALUES (?1, ?2, ?3, ?3)
		ON CONFLICT (id) DO UPDATE SET last_seq = last_seq + excluded.last_seq, updated = excluded.updated
		RETURNING last_seq`)
	if err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	defer bump.Close()
	insert, err := tx.PrepareContext(ctx, `INSERT INTO events (thread, seq, id, run, type, time, data)
		VALUES (?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	defer insert.Close()

	now := time.Now().UnixMicro()
	for _, a := range batch {
		var last int64
		if err := bump.QueryRowContext(ctx, a.Thread, len(a.Events), now).Scan(&last); err != nil {
			return fmt.Errorf("thread %q: %w", a.Thread, err)
		}
		first := last - int64(len(a.Events)) + 1
		for i := range a.Events {
			e := &a.Events[i]
			e.Seq = first + int64(i)
			if _, err := insert.ExecContext(ctx, a.Thread, e.Seq, e.ID, e.Run, string(e.Type()), e.Time.UnixMicro(), string(a.Data[i])); err != nil {
				return fmt.Errorf("thread %q seq %d: %w", a.Thread, e.Seq, err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}
