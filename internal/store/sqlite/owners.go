package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/agentwire/agentwire/internal/store"
)

var _ store.Owners = (*Store)(nil)

// OwnThread implements store.Owners.
func (s *Store) OwnThread(ctx context.Context, thread, principal string) (string, error) {
	if thread == "" || principal == "" {
		return "", fmt.Errorf("sqlite: own thread: thread and principal are required")
	}
	var owner string
	// Synced with the next commit that syncs (see the package comment):
	// nothing of the thread can be durable before its owner is.
	err := s.writeLater(ctx, laterWrite(func(ctx context.Context, tx wtx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO thread_owners (thread, principal, since) VALUES (?, ?, ?)
			ON CONFLICT (thread) DO NOTHING`, thread, principal, now()); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `SELECT principal FROM thread_owners WHERE thread = ?`, thread).Scan(&owner)
	}))
	if err != nil {
		return "", fmt.Errorf("sqlite: own thread %q: %w", thread, s.closedErr(err))
	}
	return owner, nil
}

// ThreadOwner implements store.Owners.
func (s *Store) ThreadOwner(ctx context.Context, thread string) (string, bool, error) {
	if err := s.usable(ctx); err != nil {
		return "", false, err
	}
	var owner string
	err := s.scanRow(ctx, `SELECT principal FROM thread_owners WHERE thread = ?`, []any{thread}, &owner)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("sqlite: owner of %q: %w", thread, s.closedErr(err))
	}
	return owner, true, nil
}
