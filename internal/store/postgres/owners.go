package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agentwire/agentwire/internal/store"
)

var _ store.Owners = (*Store)(nil)

// OwnThread implements store.Owners in one statement: the upsert returns
// the row as it stands after it, whoever inserted it.
func (s *Store) OwnThread(ctx context.Context, thread, principal string) (string, error) {
	if thread == "" || principal == "" {
		return "", fmt.Errorf("postgres: own thread: thread and principal are required")
	}
	if err := s.usable(ctx); err != nil {
		return "", err
	}
	var owner string
	err := s.pool.QueryRow(ctx, `INSERT INTO thread_owners (thread, principal, since) VALUES ($1, $2, now())
		ON CONFLICT (thread) DO UPDATE SET thread = excluded.thread
		RETURNING principal`, thread, principal).Scan(&owner)
	if err != nil {
		return "", fmt.Errorf("postgres: own thread %q: %w", thread, s.closedErr(err))
	}
	return owner, nil
}

// ThreadOwner implements store.Owners.
func (s *Store) ThreadOwner(ctx context.Context, thread string) (string, bool, error) {
	if err := s.usable(ctx); err != nil {
		return "", false, err
	}
	var owner string
	err := s.pool.QueryRow(ctx, `SELECT principal FROM thread_owners WHERE thread = $1`, thread).Scan(&owner)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("postgres: owner of %q: %w", thread, s.closedErr(err))
	}
	return owner, true, nil
}
