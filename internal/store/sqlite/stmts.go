package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// SQLite compiles a statement's text every time it runs one unprepared, and
// for the short statements a post makes (its claim, a new thread's owner,
// the reads of a thread's owner and last seq, the savepoints around each
// write) compiling costs more than running: it was a tenth of the server's
// CPU while threads sessions opened (docs/BENCHMARKS.md, "Where opening a
// threads session goes"). So the store keeps every statement it runs
// prepared, by its text, for its life: stmts on each pool, and wtx for the
// writes made in a group commit's transaction.
//
// Only texts that are constants (or drawn from a small fixed set) go
// through them: a text built per call (Spent's, whose columns depend on
// its arguments) is run unprepared. A PRAGMA is never kept: SQLite carries
// most of them out while it prepares them, so running one prepared again
// would neither set nor read anything (a kept "PRAGMA synchronous = FULL"
// would leave commits unsynced). The writer's "PRAGMA data_version", which
// SQLite reads when it runs, is prepared on its own (prepareWriter).

// stmts is a cache of statements prepared on one pool, by their text. A
// nil *stmts keeps nothing: its users run their statements unprepared (the
// baseline of BenchmarkPostStatements).
type stmts struct {
	db *sql.DB
	mu sync.Mutex
	m  map[string]*sql.Stmt
}

// keepable reports whether q may be kept prepared: anything but a PRAGMA.
func keepable(q string) bool {
	return !strings.HasPrefix(strings.ToUpper(strings.TrimSpace(q)), "PRAGMA")
}

func newStmts(db *sql.DB) *stmts { return &stmts{db: db, m: map[string]*sql.Stmt{}} }

// get returns q prepared on the pool, preparing it on its first use.
// Preparing takes a connection of the pool, so get must not be called on
// the write pool while a transaction holds its one connection (wtx does
// not: it prepares after the commit).
func (c *stmts) get(ctx context.Context, q string) (*sql.Stmt, error) {
	if !keepable(q) {
		return nil, fmt.Errorf("sqlite: %q is not kept prepared (a PRAGMA takes effect when it is prepared)", q)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.m[q]; ok {
		return st, nil
	}
	st, err := c.db.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	c.m[q] = st
	return st, nil
}

// prepared returns q if it is prepared already, or nil.
func (c *stmts) prepared(q string) *sql.Stmt {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[q]
}

// len reports how many statements are prepared.
func (c *stmts) len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

func (c *stmts) close() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for q, st := range c.m {
		errs = append(errs, st.Close())
		delete(c.m, q)
	}
	return errors.Join(errs...)
}

// A wtx is a group commit's transaction as a write (Store.write) sees it.
// A statement it runs is run prepared when the write connection has it
// prepared; otherwise it runs unprepared this once and is prepared after
// the transaction ends (Store.flush calls prepareSeen), when the one
// connection is free again.
type wtx struct {
	tx *sql.Tx
	w  *writer
}

// stmt returns q prepared and bound to the transaction, or nil when q is
// not prepared yet (it is noted for prepareSeen).
func (t wtx) stmt(ctx context.Context, q string) *sql.Stmt {
	if !keepable(q) {
		return nil
	}
	if st := t.w.stmts.prepared(q); st != nil {
		return t.tx.StmtContext(ctx, st)
	}
	if t.w.stmts != nil {
		t.w.unseen[q] = struct{}{}
	}
	t.w.unprepared++
	return nil
}

func (t wtx) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if st := t.stmt(ctx, q); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return t.tx.ExecContext(ctx, q, args...)
}

func (t wtx) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if st := t.stmt(ctx, q); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return t.tx.QueryContext(ctx, q, args...)
}

func (t wtx) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	if st := t.stmt(ctx, q); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return t.tx.QueryRowContext(ctx, q, args...)
}

// prepareSeen prepares the statements the last transaction ran
// unprepared. It runs between transactions, on the writer's goroutine. A
// statement that does not prepare is left to run unprepared.
func (w *writer) prepareSeen(ctx context.Context) {
	if w.stmts == nil {
		return
	}
	for q := range w.unseen {
		_, _ = w.stmts.get(ctx, q)
		delete(w.unseen, q)
	}
}
