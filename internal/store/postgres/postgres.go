// Package postgres is the store.Log for running several agentwire servers
// over one PostgreSQL database (pgx v5).
//
// Semantics match the SQLite store, including under concurrency between
// processes: seqs are reserved from the thread's row, locked until commit,
// so servers appending to the same thread at once never duplicate or skip a
// seq. Within one Store, appends go through one writer goroutine that commits
// every append waiting at that moment in one transaction (group commit, see
// internal/groupcommit). Commits use the server's synchronous_commit; with
// the default (on), an acknowledged append is on disk.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/store"
	"github.com/agentwire/agentwire/internal/store/internal/groupcommit"
)

// Options configure Open; the zero value is usable.
type Options struct {
	// Logger receives lifecycle messages; nil discards them.
	Logger *slog.Logger
	// Schema, when set, holds the store's tables (created if missing);
	// otherwise they go where the connection's search_path puts them.
	Schema string
	// MaxConns bounds the connection pool (default: pgxpool's, or the
	// url's pool_max_conns). One connection at a time writes.
	MaxConns int32
	// MaxBatchEvents bounds the events committed in one transaction
	// (default 2048).
	MaxBatchEvents int
}

// Store is a store.Log kept in PostgreSQL.
type Store struct {
	pool   *pgxpool.Pool
	log    *slog.Logger
	commit *groupcommit.Committer
	closed atomic.Bool
}

var _ store.Log = (*Store)(nil)

// historyTypes are store.HistoryTypes as query arguments.
func historyTypes() []string {
	ts := make([]string, len(store.HistoryTypes))
	for i, t := range store.HistoryTypes {
		ts[i] = string(t)
	}
	return ts
}

// Open connects to the database at url (a postgres:// URL or key=value
// string), applies schema migrations and starts the writer.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	if opts.Schema != "" {
		cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{opts.Schema}.Sanitize()
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	version, err := migrateSchema(ctx, pool, opts.Schema)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: open %s: %w", cfg.ConnConfig.Host, err)
	}
	s := &Store{pool: pool, log: opts.Logger}
	s.commit = groupcommit.New(s.flush, groupcommit.Options{MaxEvents: opts.MaxBatchEvents})
	s.log.Info("postgres store open", "host", cfg.ConnConfig.Host, "database", cfg.ConnConfig.Database,
		"schema", opts.Schema, "version", version)
	return s, nil
}

// Append implements store.Log.
func (s *Store) Append(ctx context.Context, thread string, events ...event.Event) ([]event.Event, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	return s.commit.Append(ctx, thread, events)
}

// Read implements store.Log.
func (s *Store) Read(ctx context.Context, thread string, after int64, limit int) ([]event.Event, error) {
	if limit < 1 {
		return nil, fmt.Errorf("postgres: read %q: limit %d is below 1", thread, limit)
	}
	evs, err := s.query(ctx, thread, `SELECT seq, id, run, type, time, data FROM events
		WHERE thread = $1 AND seq > $2 ORDER BY seq LIMIT $3`, thread, after, limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: read %q after %d: %w", thread, after, err)
	}
	return evs, nil
}

// History implements store.Log.
func (s *Store) History(ctx context.Context, thread string) ([]event.Event, error) {
	evs, err := s.query(ctx, thread, `SELECT seq, id, run, type, time, data FROM events
		WHERE thread = $1 AND type = ANY($2) ORDER BY seq`, thread, historyTypes())
	if err != nil {
		return nil, fmt.Errorf("postgres: history of %q: %w", thread, err)
	}
	return evs, nil
}

// LastSeq implements store.Log.
func (s *Store) LastSeq(ctx context.Context, thread string) (int64, error) {
	if err := s.usable(ctx); err != nil {
		return 0, err
	}
	var seq int64
	err := s.pool.QueryRow(ctx, `SELECT last_seq FROM threads WHERE id = $1`, thread).Scan(&seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("postgres: last seq of %q: %w", thread, s.closedErr(err))
	}
	return seq, nil
}

// Threads implements store.Log.
func (s *Store) Threads(ctx context.Context, after string, limit int) ([]store.ThreadInfo, error) {
	if limit < 1 {
		return nil, fmt.Errorf("postgres: threads: limit %d is below 1", limit)
	}
	if err := s.usable(ctx); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT id, last_seq, created, updated FROM threads
		WHERE id > $1 ORDER BY id LIMIT $2`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: threads: %w", s.closedErr(err))
	}
	var (
		out []store.ThreadInfo
		ti  store.ThreadInfo
	)
	_, err = pgx.ForEachRow(rows, []any{&ti.ID, &ti.LastSeq, &ti.Created, &ti.Updated}, func() error {
		ti.Created, ti.Updated = ti.Created.UTC(), ti.Updated.UTC()
		out = append(out, ti)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: threads: %w", s.closedErr(err))
	}
	return out, nil
}

// Close implements store.Log: it commits the appends already taken, refuses
// new ones, and closes the pool.
func (s *Store) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	s.commit.Close()
	s.pool.Close()
	s.log.Info("postgres store closed")
	return nil
}

// usable reports why a call cannot start: a closed store or a done context.
func (s *Store) usable(ctx context.Context) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	return ctx.Err()
}

// closedErr turns the error of a read that raced with Close into ErrClosed.
func (s *Store) closedErr(err error) error {
	if s.closed.Load() {
		return fmt.Errorf("%w (%v)", store.ErrClosed, err)
	}
	return err
}

// query runs an events query for thread and decodes its rows.
func (s *Store) query(ctx context.Context, thread, query string, args ...any) ([]event.Event, error) {
	if err := s.usable(ctx); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, s.closedErr(err)
	}
	var (
		out  []event.Event
		e    event.Event
		typ  string
		tm   time.Time
		data []byte
	)
	_, err = pgx.ForEachRow(rows, []any{&e.Seq, &e.ID, &e.Run, &typ, &tm, &data}, func() error {
		p, err := event.DecodePayload(event.Type(typ), data)
		if err != nil {
			return fmt.Errorf("seq %d: %w", e.Seq, err)
		}
		out = append(out, event.Event{Thread: thread, Seq: e.Seq, ID: e.ID, Run: e.Run, Time: tm.UTC(), Payload: p})
		return nil
	})
	if err != nil {
		return nil, s.closedErr(err)
	}
	return out, nil
}
