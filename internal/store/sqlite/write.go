package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentwire/agentwire/internal/store/internal/groupcommit"
)

const (
	// maxCachedThreads bounds the writer's seq cache; past it the cache
	// starts over (threads then cost one lookup on their next append).
	maxCachedThreads = 100_000
)

// insertChunks are the row counts of the multi-row event INSERTs, largest
// first: a batch of n events takes n/32 statements of 32 rows, then 8s, then
// single rows. Fewer, larger statements cut the per-statement cost that
// dominates SQLite inserts once the commit itself is shared.
//
// The writer's statements are INSERT OR ROLLBACK: a failing statement fails
// the whole batch anyway, and without the ability to undo just one
// statement SQLite need not copy every page a multi-row statement touches
// into its statement journal first.
var insertChunks = []int{32, 8, 1}

// beginThreadsSQL are the statements that record new threads
// (beginThreads), by the rows each records (insertChunks): ?1 is the
// time, ?2 onwards the threads.
var beginThreadsSQL = func() map[int]string {
	m := map[int]string{}
	for _, n := range insertChunks {
		var q strings.Builder
		q.WriteString(`INSERT OR ROLLBACK INTO threads (id, created) VALUES `)
		for i := range n {
			if i > 0 {
				q.WriteString(", ")
			}
			fmt.Fprintf(&q, "(?%d, ?1)", i+2)
		}
		q.WriteString(` ON CONFLICT (id) DO NOTHING`)
		m[n] = q.String()
	}
	return m
}()

// writer is what the writer goroutine keeps between batches: prepared
// statements on the write connection and a cache of last seqs. Only flush
// touches it, and flush runs on that one goroutine.
type writer struct {
	inserts     map[int]*sql.Stmt // by rows per statement (insertChunks)
	dataVersion *sql.Stmt
	threadSeq   *sql.Stmt

	// stmts are the other statements run on the write connection, prepared
	// (see wtx); unseen are those the transaction under way ran unprepared.
	stmts      *stmts
	unseen     map[string]struct{}
	unprepared int // statements that could be kept run unprepared, in all

	// lastSeq caches the last seq of threads this connection wrote, so a
	// batch needs no lookup per append. It is trusted only while
	// version is unchanged: PRAGMA data_version moves when another
	// connection (another process, another Store) commits to the file, and
	// stays put for this connection's own commits.
	lastSeq map[string]int64
	version int64

	// syncing is the connection's synchronous setting (setSync), known
	// once set.
	syncing, syncKnown bool
}

// prepareWriter prepares the writer's statements on the write pool (one
// connection).
func (s *Store) prepareWriter(ctx context.Context) error {
	w := &s.writer
	w.lastSeq = map[string]int64{}
	w.version = -1
	w.inserts = map[int]*sql.Stmt{}
	w.stmts = newStmts(s.wdb)
	w.unseen = map[string]struct{}{}
	var err error
	prep := func(q string) *sql.Stmt {
		if err != nil {
			return nil
		}
		var st *sql.Stmt
		st, err = s.wdb.PrepareContext(ctx, q)
		return st
	}
	for _, n := range insertChunks {
		w.inserts[n] = prep(`INSERT OR ROLLBACK INTO events (thread, seq, id, run, type, time, data) VALUES ` +
			strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?, ?, ?), ", n), ", "))
	}
	w.dataVersion = prep(`PRAGMA data_version`)
	w.threadSeq = prep(`SELECT coalesce(max(seq), 0) FROM events WHERE thread = ?`)
	return err
}

func (w *writer) close() error {
	var errs []error
	for _, st := range []*sql.Stmt{w.dataVersion, w.threadSeq} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	for _, st := range w.inserts {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	errs = append(errs, w.stmts.close())
	return errors.Join(errs...)
}

// flush commits one batch of appends in one transaction: take each thread's
// last seq (cached, else its events' max(seq)), insert the events, and
// record the threads that begin; run the writes (Store.write) in the batch
// too. BEGIN IMMEDIATE takes the write lock first, so seqs stay gapless
// even when another process appends to the same file.
func (s *Store) flush(ctx context.Context, batch []*groupcommit.Append) (err error) {
	w := &s.writer
	defer func() {
		if err != nil { // the seqs this batch took are rolled back
			clear(w.lastSeq)
			w.version = -1
		}
		w.prepareSeen(ctx) // the transaction has ended: the connection is free
	}()
	if err := s.setSync(ctx, !syncLater(batch)); err != nil {
		return err
	}
	tx, err := s.wdb.BeginTx(ctx, nil) // BEGIN IMMEDIATE (see dsn)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	wt := wtx{tx: tx, w: w}

	var version int64
	if err := tx.StmtContext(ctx, w.dataVersion).QueryRowContext(ctx).Scan(&version); err != nil {
		return fmt.Errorf("data version: %w", err)
	}
	if version != w.version || len(w.lastSeq) > maxCachedThreads {
		clear(w.lastSeq)
		w.version = version
	}

	var (
		begun []string // threads new to the log, in batch order
		rows  []any    // event rows, 7 values each
	)
	threadSeq := tx.StmtContext(ctx, w.threadSeq)
	for _, a := range batch {
		if a.Write != nil {
			if a.Err, err = runWrite(ctx, wt, a.Write); err != nil {
				return err
			}
			if a.Err != nil || len(a.Events) == 0 {
				continue // a failed guard appends nothing
			}
		}
		last, ok := w.lastSeq[a.Thread]
		if !ok {
			if err := threadSeq.QueryRowContext(ctx, a.Thread).Scan(&last); err != nil {
				return fmt.Errorf("thread %q: %w", a.Thread, err)
			}
			if last == 0 {
				begun = append(begun, a.Thread)
			}
		}
		for i := range a.Events {
			e := &a.Events[i]
			last++
			e.Seq = last
			rows = append(rows, a.Thread, e.Seq, e.ID, e.Run, string(e.Type()), e.Time.UnixMicro(), string(a.Data[i]))
		}
		w.lastSeq[a.Thread] = last
	}
	if err := s.insertRows(ctx, tx, rows); err != nil {
		return err
	}
	if err := beginThreads(ctx, wt, begun); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// A write is a change other than an append (a run's claim, a thread's
// owner) made on the write connection in a group commit's transaction
// (Store.write).
type write func(ctx context.Context, tx wtx) error

// A laterWrite is a write that need not sync the disk on its own: a batch
// of nothing else commits without syncing, and the next commit that syncs
// the WAL makes it durable too (see the package comment).
type laterWrite write

// syncLater reports whether batch holds only laterWrites.
func syncLater(batch []*groupcommit.Append) bool {
	for _, a := range batch {
		if _, ok := a.Write.(laterWrite); !ok || len(a.Events) > 0 {
			return false
		}
	}
	return true
}

// setSync makes the write connection's commits sync the WAL or not. With
// Options.Synchronous NORMAL they never do.
func (s *Store) setSync(ctx context.Context, sync bool) error {
	w := &s.writer
	sync = sync && s.full
	if w.syncKnown && w.syncing == sync {
		return nil
	}
	mode := "NORMAL"
	if sync {
		mode = "FULL"
	}
	w.syncKnown = false
	// Not through w.stmts: a PRAGMA takes effect when it is prepared.
	if _, err := s.wdb.ExecContext(ctx, `PRAGMA synchronous = `+mode); err != nil {
		return fmt.Errorf("synchronous %s: %w", mode, err)
	}
	w.syncKnown, w.syncing = true, sync
	return nil
}

// write runs w in the next group commit and waits for that commit: many
// small writes, each its own transaction, would each pay a sync of the disk
// and be made one after another on the one write connection.
//
// A write offered is waited for even if ctx ends meanwhile (the commit's
// own timeout bounds the wait), so that the caller always learns whether it
// was made: a claim reported as failed must not have been taken.
func (s *Store) write(ctx context.Context, w write) error {
	return s.do(ctx, w)
}

// writeLater is write for a laterWrite.
func (s *Store) writeLater(ctx context.Context, w laterWrite) error {
	return s.do(ctx, w)
}

func (s *Store) do(ctx context.Context, w any) error {
	if err := s.usable(ctx); err != nil {
		return err
	}
	return s.commit.Do(context.WithoutCancel(ctx), w)
}

// runWrite runs a write within a savepoint, so that a failing write is undone
// alone: its error is returned as failed, and the batch goes on. err is what
// fails the batch.
func runWrite(ctx context.Context, tx wtx, w any) (failed, err error) {
	var fn write
	switch w := w.(type) {
	case write:
		fn = w
	case laterWrite:
		fn = write(w)
	default:
		return nil, fmt.Errorf("unknown write %T", w)
	}
	if _, err := tx.ExecContext(ctx, `SAVEPOINT write`); err != nil {
		return nil, fmt.Errorf("savepoint: %w", err)
	}
	if failed = fn(ctx, tx); failed != nil {
		if _, err := tx.ExecContext(ctx, `ROLLBACK TO write`); err != nil {
			return nil, fmt.Errorf("undo a failed write (%v): %w", failed, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `RELEASE write`); err != nil {
		return nil, fmt.Errorf("release savepoint: %w", err)
	}
	return failed, nil
}

// insertRows inserts event rows (7 values each) with the fewest statements
// insertChunks allow.
func (s *Store) insertRows(ctx context.Context, tx *sql.Tx, rows []any) error {
	const cols = 7
	for _, n := range insertChunks {
		st := tx.StmtContext(ctx, s.writer.inserts[n])
		for len(rows) >= n*cols {
			if _, err := st.ExecContext(ctx, rows[:n*cols]...); err != nil {
				return fmt.Errorf("insert events of thread %q from seq %d: %w", rows[0], rows[1], err)
			}
			rows = rows[n*cols:]
		}
	}
	return nil
}

// beginThreads records threads that begin in this batch, with the fewest
// statements insertChunks allow.
func beginThreads(ctx context.Context, tx wtx, threads []string) error {
	now := time.Now().UnixMicro()
	for _, n := range insertChunks {
		q := beginThreadsSQL[n]
		for len(threads) >= n {
			args := make([]any, 0, n+1)
			args = append(args, now)
			for _, th := range threads[:n] {
				args = append(args, th)
			}
			if _, err := tx.ExecContext(ctx, q, args...); err != nil {
				return fmt.Errorf("record new threads: %w", err)
			}
			threads = threads[n:]
		}
	}
	return nil
}
