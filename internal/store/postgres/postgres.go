// Package postgres is the store.Log for running several agentwire servers
// over one PostgreSQL database (pgx v5).
//
// Semantics match the SQLite store, including under concurrency between
// processes: a batch takes a transaction-scoped advisory lock on each thread
// it appends to and numbers the thread's events after the largest seq the
// events table holds, or after the one the writer remembers, which the
// events' primary key checks (see write.go), so servers appending to the
// same thread at once never duplicate or skip a seq. Within one Store,
// appends go through one writer goroutine that commits every append waiting
// at that moment in one transaction (group commit, see
// internal/groupcommit). Commits use the server's synchronous_commit; with
// the default (on), an acknowledged append is on disk.
package postgres

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/metrics"
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
	// Metrics counts the group commits (their events and durations); nil
	// counts nothing.
	Metrics *metrics.Metrics
}

// Store is a store.Log kept in PostgreSQL.
type Store struct {
	pool   *pgxpool.Pool
	log    *slog.Logger
	schema string
	commit *groupcommit.Committer
	seqs   seqCache // the writer's (flush's)
	// stale names threads whose last seq another transaction of this
	// store moved (ClaimAndAppend): the writer drops them from seqs
	// before its next batch.
	staleMu sync.Mutex
	stale   map[string]bool
	closed  atomic.Bool
	// threadLocks is how many threads a batch locks one by one
	// (defaultThreadLocks; tests lower it).
	threadLocks int
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
	version, err := migrateSchema(ctx, pool, opts.Schema, 0)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: open %s: %w", cfg.ConnConfig.Host, err)
	}
	s := &Store{pool: pool, log: opts.Logger, schema: opts.Schema, threadLocks: defaultThreadLocks,
		seqs: seqCache{last: map[string]int64{}}, stale: map[string]bool{}}
	s.commit = groupcommit.New(s.flush, groupcommit.Options{MaxEvents: opts.MaxBatchEvents,
		Observe: func(n int, took time.Duration) { opts.Metrics.Commit("postgres", n, took) }})
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
	evs, err := s.query(ctx, thread, store.ReadCapacity(limit), `SELECT seq, id, run, type, time, data FROM events
		WHERE thread = $1 AND seq > $2 ORDER BY seq LIMIT $3`, thread, after, limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: read %q after %d: %w", thread, after, err)
	}
	return evs, nil
}

// History implements store.Log.
func (s *Store) History(ctx context.Context, thread string) ([]event.Event, error) {
	evs, err := s.query(ctx, thread, 64, `SELECT seq, id, run, type, time, data FROM events
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
	err := s.pool.QueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM events WHERE thread = $1`, thread).Scan(&seq)
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
	// A thread's last seq and its last write are those of its last event
	// (one probe of the events' primary key each); Updated is that event's
	// Time, and never before Created.
	rows, err := s.pool.Query(ctx, `SELECT t.id, coalesce(l.seq, 0), t.created, greatest(t.created, l.time)
		FROM threads t LEFT JOIN LATERAL (
			SELECT e.seq, e.time FROM events e WHERE e.thread = t.id ORDER BY e.seq DESC LIMIT 1
		) l ON true
		WHERE t.id > $1 ORDER BY t.id LIMIT $2`, after, limit)
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

// query runs an events query for thread and decodes its rows into a slice
// of capacity capacity to begin with.
//
// Rows are read from their raw bytes (binary format) rather than through
// pgx's Scan, which costs as much as decoding the payload: the type maps to
// its Type without a copy (event.ParseType), the id and run share one
// allocation, and the payload is copied once, its strings slices of that
// copy (event.DecodePayloadString).
func (s *Store) query(ctx context.Context, thread string, capacity int, query string, args ...any) ([]event.Event, error) {
	if err := s.usable(ctx); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, s.closedErr(err)
	}
	defer rows.Close()
	out := make([]event.Event, 0, capacity)
	fast := binaryRows(rows.FieldDescriptions())
	var buf []byte
	for rows.Next() {
		raw := rows.RawValues()
		e := event.Event{Thread: thread}
		ok := fast
		if ok {
			e.Seq, e.Time, ok = seqAndTime(raw[0], raw[4])
		}
		if ok {
			buf = append(append(buf[:0], raw[1]...), raw[2]...)
			ids := string(buf)
			e.ID, e.Run = ids[:len(raw[1])], ids[len(raw[1]):]
		} else if err := rows.Scan(&e.Seq, &e.ID, &e.Run, nil, &e.Time, nil); err != nil {
			return nil, s.closedErr(err)
		}
		e.Time = e.Time.UTC()
		// json is its text in either format.
		if e.Payload, err = event.DecodePayloadString(event.ParseType(raw[3]), string(raw[5])); err != nil {
			return nil, fmt.Errorf("seq %d: %w", e.Seq, err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, s.closedErr(err)
	}
	return out, nil
}

// binaryRows reports whether rows of seq, id, run, type, time, data come
// with seq and time in the binary formats seqAndTime reads.
func binaryRows(fds []pgconn.FieldDescription) bool {
	return len(fds) == 6 &&
		fds[0].DataTypeOID == pgtype.Int8OID && fds[0].Format == pgtype.BinaryFormatCode &&
		fds[4].DataTypeOID == pgtype.TimestamptzOID && fds[4].Format == pgtype.BinaryFormatCode
}

// seqAndTime reads a binary int8 and a binary timestamptz (microseconds
// since 2000-01-01 UTC). It reports false for what it does not read, ±
// infinity, which pgx's Scan then refuses.
func seqAndTime(seq, tm []byte) (int64, time.Time, bool) {
	if len(seq) != 8 || len(tm) != 8 {
		return 0, time.Time{}, false
	}
	us := int64(binary.BigEndian.Uint64(tm))
	if us == math.MaxInt64 || us == math.MinInt64 {
		return 0, time.Time{}, false
	}
	const y2k = 946_684_800 * 1_000_000 // 2000-01-01 in Unix microseconds
	return int64(binary.BigEndian.Uint64(seq)), time.UnixMicro(us + y2k), true
}
