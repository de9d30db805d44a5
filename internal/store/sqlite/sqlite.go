// Package sqlite is the default store.Log: one SQLite file in the data
// directory, no setup. It is pure Go (modernc.org/sqlite).
//
// The database runs in WAL mode so readers never block the writer. All
// appends go through one writer goroutine that owns the only write
// connection and commits every append waiting at that moment in one
// transaction (group commit, see internal/groupcommit); reads use a separate
// pool of query-only connections. Statements are kept prepared: the hot
// ones from Open, the rest once they have run (stmts.go); a PRAGMA is not,
// but for data_version, which SQLite reads when it runs.
//
// Durability is chosen with Options.Synchronous. FULL, the default, syncs
// the WAL on every commit, so an acknowledged append survives power loss and
// a machine crash. NORMAL syncs only at checkpoints: an acknowledged append
// still survives the process being killed, but the last commits can be lost
// if the machine goes down. docs/BENCHMARKS.md has both measured.
//
// One write is exempt from FULL: a thread's owner (OwnThread). A commit of
// owner records alone does not sync; the next commit that does sync the WAL
// makes them durable with it, as the WAL is written in order. So a thread
// can lose its owner in a crash only while nothing else of it was
// committed, when there is nothing in it for anyone to see, and the first
// access after the crash owns it again.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/metrics"
	"github.com/agentwire/agentwire/internal/store"
	"github.com/agentwire/agentwire/internal/store/internal/groupcommit"
)

// FileName is the database file the store keeps in its directory.
const FileName = "agentwire.db"

// Options configure Open.
type Options struct {
	// Dir is the data directory; it is created if missing. Required.
	Dir string
	// Logger receives lifecycle messages; nil discards them.
	Logger *slog.Logger
	// Synchronous is SQLite's synchronous setting for commits: "FULL" (the
	// default) or "NORMAL". See the package comment for what each keeps.
	Synchronous string
	// Readers is the size of the read connection pool (default
	// max(4, GOMAXPROCS)).
	Readers int
	// BusyTimeout is how long a connection waits for a lock held by another
	// process using the same file (default 10s).
	BusyTimeout time.Duration
	// MaxBatchEvents bounds the events committed in one transaction
	// (default 2048).
	MaxBatchEvents int
	// Metrics counts the group commits (their events and durations); nil
	// counts nothing.
	Metrics *metrics.Metrics
}

// Store is a store.Log kept in one SQLite file.
type Store struct {
	path   string
	log    *slog.Logger
	wdb    *sql.DB // one connection: the writer goroutine's (and Open's and Close's)
	rdb    *sql.DB // query-only pool
	commit *groupcommit.Committer
	writer writer // owned by the writer goroutine (flush)
	full   bool   // commits sync the WAL (Options.Synchronous FULL)
	closed atomic.Bool
	// read and history are Read's and History's queries, prepared on rdb:
	// compiling one costs as much as reading a hundred events.
	read, history *sql.Stmt
	// reads are the other reads, prepared on rdb as they are first run
	// (see stmts).
	reads *stmts
}

var _ store.Log = (*Store)(nil)

// Open opens (creating if needed) the store in opts.Dir, applies schema
// migrations and starts the writer.
func Open(ctx context.Context, opts Options) (*Store, error) {
	if opts.Dir == "" {
		return nil, errors.New("sqlite: Options.Dir is required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	sync := strings.ToUpper(opts.Synchronous)
	switch sync {
	case "":
		sync = "FULL"
	case "FULL", "NORMAL":
	default:
		return nil, fmt.Errorf("sqlite: Options.Synchronous %q: want FULL or NORMAL", opts.Synchronous)
	}
	if opts.Readers <= 0 {
		opts.Readers = max(4, runtime.GOMAXPROCS(0))
	}
	if opts.BusyTimeout <= 0 {
		opts.BusyTimeout = 10 * time.Second
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	path := filepath.Join(opts.Dir, FileName)
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("sqlite: data directory %q: '?' and '#' are not supported in the path", opts.Dir)
	}

	q := url.Values{}
	q.Set("_busy_timeout", fmt.Sprint(opts.BusyTimeout.Milliseconds()))
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", sync)
	q.Set("_txlock", "immediate")
	wdb, err := sql.Open("sqlite", path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	// One write connection, kept for the store's life: SQLite has one
	// writer anyway, and the writer's prepared statements live on it.
	wdb.SetMaxOpenConns(1)
	wdb.SetMaxIdleConns(1)
	wdb.SetConnMaxIdleTime(0)
	wdb.SetConnMaxLifetime(0)
	s := &Store{path: path, log: opts.Logger, wdb: wdb, full: sync == "FULL"}
	fail := func(err error) (*Store, error) {
		s.closeDBs()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	version, err := migrateSchema(ctx, wdb)
	if err != nil {
		return fail(err)
	}
	if err := s.prepareWriter(ctx); err != nil {
		return fail(err)
	}

	rq := url.Values{}
	rq.Set("_busy_timeout", fmt.Sprint(opts.BusyTimeout.Milliseconds()))
	rq.Set("_query_only", "1")
	if s.rdb, err = sql.Open("sqlite", path+"?"+rq.Encode()); err != nil {
		return fail(err)
	}
	s.rdb.SetMaxOpenConns(opts.Readers)
	s.rdb.SetMaxIdleConns(opts.Readers)
	if err := s.rdb.PingContext(ctx); err != nil {
		return fail(err)
	}
	s.reads = newStmts(s.rdb)

	if s.read, err = s.rdb.PrepareContext(ctx, `SELECT seq, id, run, type, time, data FROM events
		WHERE thread = ? AND seq > ? ORDER BY seq LIMIT ?`); err != nil {
		return fail(err)
	}
	if s.history, err = s.rdb.PrepareContext(ctx, `SELECT seq, id, run, type, time, data FROM events WHERE thread = ? AND type IN (`+
		strings.TrimSuffix(strings.Repeat("?, ", len(store.HistoryTypes)), ", ")+`) ORDER BY seq`); err != nil {
		return fail(err)
	}
	s.commit = groupcommit.New(s.flush, groupcommit.Options{MaxEvents: opts.MaxBatchEvents,
		Observe: func(n int, took time.Duration) { opts.Metrics.Commit("sqlite", n, took) }})
	s.log.Info("sqlite store open", "path", path, "schema", version, "synchronous", sync)
	return s, nil
}

// Path reports the database file.
func (s *Store) Path() string { return s.path }

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
		return nil, fmt.Errorf("sqlite: read %q: limit %d is below 1", thread, limit)
	}
	evs, err := s.query(ctx, thread, store.ReadCapacity(limit), s.read, thread, after, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: read %q after %d: %w", thread, after, err)
	}
	return evs, nil
}

// History implements store.Log.
func (s *Store) History(ctx context.Context, thread string) ([]event.Event, error) {
	args := make([]any, 0, 1+len(store.HistoryTypes))
	args = append(args, thread)
	for _, t := range store.HistoryTypes {
		args = append(args, string(t))
	}
	evs, err := s.query(ctx, thread, 64, s.history, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: history of %q: %w", thread, err)
	}
	return evs, nil
}

// LastSeq implements store.Log.
func (s *Store) LastSeq(ctx context.Context, thread string) (int64, error) {
	if err := s.usable(ctx); err != nil {
		return 0, err
	}
	var seq int64
	err := s.scanRow(ctx, `SELECT coalesce(max(seq), 0) FROM events WHERE thread = ?`, []any{thread}, &seq)
	if err != nil {
		return 0, fmt.Errorf("sqlite: last seq of %q: %w", thread, s.closedErr(err))
	}
	return seq, nil
}

// Threads implements store.Log.
func (s *Store) Threads(ctx context.Context, after string, limit int) ([]store.ThreadInfo, error) {
	if limit < 1 {
		return nil, fmt.Errorf("sqlite: threads: limit %d is below 1", limit)
	}
	if err := s.usable(ctx); err != nil {
		return nil, err
	}
	// A thread's last seq and its last write are those of its last event
	// (a probe of the events' primary key); Updated is that event's Time,
	// and never before Created.
	rows, err := s.queryRows(ctx, `SELECT t.id, coalesce(l.seq, 0), t.created, max(t.created, coalesce(l.time, 0))
		FROM threads t LEFT JOIN events l
			ON l.thread = t.id AND l.seq = (SELECT max(seq) FROM events WHERE thread = t.id)
		WHERE t.id > ? ORDER BY t.id LIMIT ?`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: threads: %w", s.closedErr(err))
	}
	defer rows.Close()
	var out []store.ThreadInfo
	for rows.Next() {
		var ti store.ThreadInfo
		var created, updated int64
		if err := rows.Scan(&ti.ID, &ti.LastSeq, &created, &updated); err != nil {
			return nil, fmt.Errorf("sqlite: threads: %w", err)
		}
		ti.Created = time.UnixMicro(created).UTC()
		ti.Updated = time.UnixMicro(updated).UTC()
		out = append(out, ti)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: threads: %w", s.closedErr(err))
	}
	return out, nil
}

// Close implements store.Log: it commits the appends already taken, refuses
// new ones, and closes the database.
func (s *Store) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	s.commit.Close()
	// Let SQLite refresh its planner statistics where they are stale; cheap,
	// and recommended on closing a connection that wrote.
	if _, err := s.wdb.ExecContext(context.Background(), `PRAGMA optimize`); err != nil {
		s.log.Warn("sqlite: optimize on close", "err", err)
	}
	err := s.closeDBs()
	s.log.Info("sqlite store closed", "path", s.path)
	if err != nil {
		return fmt.Errorf("sqlite: close %s: %w", s.path, err)
	}
	return nil
}

func (s *Store) closeDBs() error {
	errs := []error{s.writer.close(), s.reads.close()}
	for _, st := range []*sql.Stmt{s.read, s.history} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	if s.rdb != nil {
		errs = append(errs, s.rdb.Close())
	}
	errs = append(errs, s.wdb.Close())
	return errors.Join(errs...)
}

// queryRows runs the read q on the read pool, prepared (see stmts).
func (s *Store) queryRows(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if s.reads == nil {
		return s.rdb.QueryContext(ctx, q, args...)
	}
	st, err := s.reads.get(ctx, q)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

// scanRow runs the one-row read q on the read pool, prepared (see stmts),
// and scans its row into dest.
func (s *Store) scanRow(ctx context.Context, q string, args []any, dest ...any) error {
	if s.reads == nil {
		return s.rdb.QueryRowContext(ctx, q, args...).Scan(dest...)
	}
	st, err := s.reads.get(ctx, q)
	if err != nil {
		return err
	}
	return st.QueryRowContext(ctx, args...).Scan(dest...)
}

// usable reports why a read cannot start: a closed store or a done context.
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

// query runs an events query (a statement prepared on rdb) for thread and
// decodes its rows into a slice of capacity capacity to begin with.
//
// The driver hands text columns over as strings of their own, which Scan
// passes on without copying; the payload's strings are slices of its one
// (event.DecodePayloadString).
func (s *Store) query(ctx context.Context, thread string, capacity int, query *sql.Stmt, args ...any) ([]event.Event, error) {
	if err := s.usable(ctx); err != nil {
		return nil, err
	}
	rows, err := query.QueryContext(ctx, args...)
	if err != nil {
		return nil, s.closedErr(err)
	}
	defer rows.Close()
	var (
		out       = make([]event.Event, 0, capacity)
		typ, data string
		us        int64
	)
	for rows.Next() {
		e := event.Event{Thread: thread}
		if err := rows.Scan(&e.Seq, &e.ID, &e.Run, &typ, &us, &data); err != nil {
			return nil, err
		}
		if e.Payload, err = event.DecodePayloadString(event.Type(typ), data); err != nil {
			return nil, fmt.Errorf("seq %d: %w", e.Seq, err)
		}
		e.Time = time.UnixMicro(us).UTC()
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, s.closedErr(err)
	}
	return out, nil
}
