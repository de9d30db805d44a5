package postgres_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/store/postgres"
	"github.com/agentwire/agentwire/internal/store/storetest"
)

// How seqs are numbered (write.go): per-thread advisory locks, the last seq
// from the events' primary key or the writer's cache, and the cache's
// checks. The conformance suite (TestStore, TestSharedWriters) covers the
// rest.

// deltas returns n events without Seq, ID or Time.
func deltas(n int) []event.Event {
	evs := make([]event.Event, n)
	for i := range evs {
		evs[i] = event.Event{Run: "r", Payload: event.MessageDelta{MessageID: "m", Text: fmt.Sprint(i)}}
	}
	return evs
}

// readThread reads all of thread and checks its seqs are 1..n.
func readThread(t *testing.T, s *postgres.Store, thread string) []event.Event {
	t.Helper()
	var all []event.Event
	for {
		page, err := s.Read(t.Context(), thread, int64(len(all)), 100)
		require.NoError(t, err)
		all = append(all, page...)
		if len(page) < 100 {
			break
		}
	}
	for i, e := range all {
		require.Equal(t, int64(i+1), e.Seq, "thread %q: event %d", thread, i)
	}
	return all
}

// rawConn connects to the test database with schema on the search path.
func rawConn(t *testing.T, schema string) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(dbURL(t))
	require.NoError(t, err)
	cfg.RuntimeParams["search_path"] = pgx.Identifier{schema}.Sanitize()
	conn, err := pgx.ConnectConfig(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// retries counts the store's log records about append batches retried
// because the seqs it had numbered them from were out of date.
type retries struct{ n atomic.Int64 }

func (r *retries) Enabled(context.Context, slog.Level) bool { return true }
func (r *retries) Handle(_ context.Context, rec slog.Record) error {
	if strings.Contains(rec.Message, "seqs looked up") {
		r.n.Add(1)
	}
	return nil
}
func (r *retries) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *retries) WithGroup(string) slog.Handler      { return r }

func openLogged(t *testing.T, schema string, h slog.Handler) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(t.Context(), dbURL(t), postgres.Options{Schema: schema, MaxConns: 4, Logger: slog.New(h)})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

// TestTwoPoolsOneThread appends to one thread from two stores, each with
// its own pool and writer (two servers), many appends at once: every seq is
// handed out once, none is skipped, and the log holds exactly what the
// appends returned.
func TestTwoPoolsOneThread(t *testing.T) {
	schema := newSchema(t)
	stores := []*postgres.Store{open(t, schema), open(t, schema)}
	const (
		workers = 16 // per store
		appends = 20
		thread  = "hot"
	)
	var (
		mu       sync.Mutex
		returned []event.Event
		wg       sync.WaitGroup
	)
	for w := range 2 * workers {
		s := stores[w%2]
		wg.Go(func() {
			for i := range appends {
				got, err := s.Append(t.Context(), thread, deltas(1+(w+i)%3)...)
				if !assert.NoError(t, err) {
					return
				}
				for k := 1; k < len(got); k++ {
					assert.Equal(t, got[k-1].Seq+1, got[k].Seq, "one append's events are contiguous")
				}
				mu.Lock()
				returned = append(returned, got...)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.SortFunc(returned, func(a, b event.Event) int { return int(a.Seq - b.Seq) })
	for i, e := range returned {
		require.Equal(t, int64(i+1), e.Seq, "the appends' seqs are 1..n, each once")
	}
	for _, s := range stores {
		require.Equal(t, returned, readThread(t, s, thread))
		last, err := s.LastSeq(t.Context(), thread)
		require.NoError(t, err)
		require.Equal(t, int64(len(returned)), last)
	}
}

// TestAppendWaitsForThreadLock holds a thread's advisory lock in another
// transaction that appends an event the way a server does, and checks that
// an append waits for it and then continues after that event. With a store
// that has not written the thread, the seq comes from the primary key, read
// after the lock was granted: no retry. With one that has, its cached last
// seq is one behind; the insert collides, and the batch is retried with the
// seq looked up.
func TestAppendWaitsForThreadLock(t *testing.T) {
	for _, cached := range []bool{false, true} {
		t.Run(fmt.Sprintf("cached=%v", cached), func(t *testing.T) {
			schema := newSchema(t)
			const thread = "locked"
			var log retries
			s := openLogged(t, schema, &log)
			_, err := s.Append(t.Context(), thread, deltas(3)...)
			require.NoError(t, err)
			if !cached {
				s = openLogged(t, schema, &log)
			}

			conn := rawConn(t, schema)
			tx, err := conn.Begin(t.Context())
			require.NoError(t, err)
			defer tx.Rollback(context.Background())
			_, err = tx.Exec(t.Context(), `SELECT pg_advisory_xact_lock($1)`, postgres.ThreadKey(schema, thread))
			require.NoError(t, err)
			_, err = tx.Exec(t.Context(), `INSERT INTO events (thread, seq, id, run, type, time, data)
				VALUES ($1, 4, $2, 'r', 'message.delta', now(), '{"message_id":"m","text":"other"}')`, thread, event.NewID())
			require.NoError(t, err)

			type result struct {
				evs []event.Event
				err error
			}
			done := make(chan result, 1)
			go func() {
				evs, err := s.Append(t.Context(), thread, deltas(1)...)
				done <- result{evs, err}
			}()
			select {
			case r := <-done:
				t.Fatalf("Append returned %+v while another transaction held the thread's lock", r)
			case <-time.After(300 * time.Millisecond):
			}
			require.NoError(t, tx.Commit(t.Context()))
			r := <-done
			require.NoError(t, r.err)
			require.Equal(t, int64(5), r.evs[0].Seq, "after the other transaction's event")
			all := readThread(t, s, thread)
			require.Len(t, all, 5)
			require.Equal(t, event.MessageDelta{MessageID: "m", Text: "other"}, all[3].Payload)
			if cached {
				require.Equal(t, int64(1), log.n.Load(), "retries with the seq looked up")
			} else {
				require.Zero(t, log.n.Load(), "retries with the seq looked up")
			}
		})
	}
}

// TestCacheFromAnotherServer makes the writer believe a thread's last seq
// is ahead of the table, as after a failover to a replica that lacks the
// last commits, and checks that it is not trusted: the server it was learnt
// from is not the one the database runs on, so the insert inserts nothing
// and the batch is retried with the seq looked up.
func TestCacheFromAnotherServer(t *testing.T) {
	schema := newSchema(t)
	var log retries
	s := openLogged(t, schema, &log)
	const thread = "t"
	_, err := s.Append(t.Context(), thread, deltas(3)...)
	require.NoError(t, err)

	postgres.CacheSeq(s, time.Unix(1, 0), thread, 100)
	got, err := s.Append(t.Context(), thread, deltas(2)...)
	require.NoError(t, err)
	require.Equal(t, []int64{4, 5}, []int64{got[0].Seq, got[1].Seq})
	require.Equal(t, int64(1), log.n.Load())

	// A cache of this server that is behind (another server appended)
	// costs one retry.
	var started time.Time
	require.NoError(t, rawConn(t, schema).QueryRow(t.Context(), `SELECT pg_postmaster_start_time()`).Scan(&started))
	postgres.CacheSeq(s, started, thread, 2)
	got, err = s.Append(t.Context(), thread, deltas(1)...)
	require.NoError(t, err)
	require.Equal(t, int64(6), got[0].Seq)
	require.Equal(t, int64(2), log.n.Load())
	readThread(t, s, thread)
}

// TestBatchesOverThreadLocks appends through stores whose batches lock the
// whole store as soon as they hold more than one or two threads, beside one
// that locks thread by thread: the two kinds exclude each other.
func TestBatchesOverThreadLocks(t *testing.T) {
	schema := newSchema(t)
	a, b, c := open(t, schema), open(t, schema), open(t, schema)
	postgres.SetThreadLocks(a, 1)
	postgres.SetThreadLocks(b, 2)
	storetest.SharedWriters(t, 24, a, b, c)
}

// TestMigrateExistingDatabase builds a database of the previous schema
// (version 3: threads keep last_seq and updated) with data in it, opens it
// with this version, and checks that nothing of it is lost and appends
// continue where its threads left off.
func TestMigrateExistingDatabase(t *testing.T) {
	schema := newSchema(t)
	ctx := t.Context()
	cfg, err := pgxpool.ParseConfig(dbURL(t))
	require.NoError(t, err)
	cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{schema}.Sanitize()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	defer pool.Close()
	version, err := postgres.MigrateTo(ctx, pool, schema, 3)
	require.NoError(t, err)
	require.Equal(t, 3, version)

	// What a server of version 3 wrote: two threads, their events, and
	// each thread's last_seq and times.
	created := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	updated := created.Add(time.Hour)
	for _, th := range []struct {
		id string
		n  int
	}{{"old-a", 3}, {"old-b", 1}} {
		_, err := pool.Exec(ctx, `INSERT INTO threads (id, last_seq, created, updated) VALUES ($1, $2, $3, $4)`,
			th.id, th.n, created, updated)
		require.NoError(t, err)
		for seq := 1; seq <= th.n; seq++ {
			_, err := pool.Exec(ctx, `INSERT INTO events (thread, seq, id, run, type, time, data)
				VALUES ($1, $2, $3, 'r', 'message.delta', $4, $5)`,
				th.id, seq, event.NewID(), created.Add(time.Duration(seq)*time.Minute),
				fmt.Sprintf(`{"message_id":"m","text":"%s %d"}`, th.id, seq))
			require.NoError(t, err)
		}
	}
	_, err = pool.Exec(ctx, `INSERT INTO thread_owners (thread, principal, since) VALUES ('old-a', 'alice', $1)`, created)
	require.NoError(t, err)

	s := open(t, schema)
	var latest int
	require.NoError(t, pool.QueryRow(ctx, `SELECT max(version) FROM schema_migrations`).Scan(&latest))
	require.Greater(t, latest, 3)
	var cols []string
	rows, err := pool.Query(ctx, `SELECT column_name::text FROM information_schema.columns
		WHERE table_schema = $1 AND table_name = 'threads' ORDER BY ordinal_position`, schema)
	require.NoError(t, err)
	cols, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"id", "created"}, cols, "threads keeps no count of its own")

	for id, n := range map[string]int64{"old-a": 3, "old-b": 1, "never": 0} {
		last, err := s.LastSeq(ctx, id)
		require.NoError(t, err)
		require.Equal(t, n, last, "LastSeq(%q)", id)
	}
	threads, err := s.Threads(ctx, "", 10)
	require.NoError(t, err)
	require.Len(t, threads, 2)
	assert.Equal(t, "old-a", threads[0].ID)
	assert.Equal(t, int64(3), threads[0].LastSeq)
	assert.Equal(t, created, threads[0].Created)
	assert.Equal(t, created.Add(3*time.Minute), threads[0].Updated, "the time of its last event")
	assert.Equal(t, int64(1), threads[1].LastSeq)
	owner, ok, err := s.ThreadOwner(ctx, "old-a")
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, "alice", owner)

	got, err := s.Append(ctx, "old-a", deltas(2)...)
	require.NoError(t, err)
	assert.Equal(t, []int64{4, 5}, []int64{got[0].Seq, got[1].Seq})
	all := readThread(t, s, "old-a")
	require.Len(t, all, 5)
	assert.Equal(t, event.MessageDelta{MessageID: "m", Text: "old-a 2"}, all[1].Payload)
	threads, err = s.Threads(ctx, "old-a", 1)
	require.NoError(t, err)
	assert.Equal(t, "old-b", threads[0].ID)
	got, err = s.Append(ctx, "new", deltas(1)...)
	require.NoError(t, err)
	assert.Equal(t, int64(1), got[0].Seq)
	threads, err = s.Threads(ctx, "", 10)
	require.NoError(t, err)
	assert.Len(t, threads, 3)
}

// TestPipelineIsOneTransaction checks what write.go relies on: the
// statements of a pgx batch (one pipeline, one Sync) run in one implicit
// transaction, so the advisory locks the first takes are still held while
// the second runs, and released at its end.
func TestPipelineIsOneTransaction(t *testing.T) {
	cfg, err := pgxpool.ParseConfig(dbURL(t))
	require.NoError(t, err)
	cfg.MaxConns = 1 // the check after the batch runs on the batch's connection
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	require.NoError(t, err)
	defer pool.Close()
	const held = `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()`
	b := &pgx.Batch{}
	b.Queue(`SELECT pg_advisory_xact_lock(k) FROM unnest($1::int8[]) AS k`, []int64{-42, 42})
	b.Queue(held)
	br := pool.SendBatch(t.Context(), b)
	_, err = br.Exec()
	require.NoError(t, err)
	var n int
	require.NoError(t, br.QueryRow().Scan(&n))
	require.NoError(t, br.Close())
	require.Equal(t, 2, n, "the locks of the first statement, held in the second")

	conn, err := pool.Acquire(t.Context())
	require.NoError(t, err)
	defer conn.Release()
	require.NoError(t, conn.QueryRow(t.Context(), held).Scan(&n))
	require.Zero(t, n, "released at the end of the batch")
}

// TestReadTextFormat reads through a connection whose results come in the
// text format (the simple protocol), which Read decodes through pgx's Scan
// instead of reading binary values itself: the same events either way.
func TestReadTextFormat(t *testing.T) {
	schema := newSchema(t)
	s := open(t, schema)
	var in []event.Event
	for _, ty := range event.Types {
		in = append(in, event.Event{Run: "r", Payload: storetest.Sample(ty)})
	}
	want, err := s.Append(t.Context(), "text", in...)
	require.NoError(t, err)
	url := dbURL(t)
	if strings.Contains(url, "?") {
		url += "&"
	} else {
		url += "?"
	}
	text, err := postgres.Open(t.Context(), url+"default_query_exec_mode=simple_protocol",
		postgres.Options{Schema: schema, MaxConns: 2})
	require.NoError(t, err)
	defer text.Close()
	got, err := text.Read(t.Context(), "text", 0, len(in))
	require.NoError(t, err)
	require.Equal(t, want, got)
	got, err = s.Read(t.Context(), "text", 0, len(in))
	require.NoError(t, err)
	require.Equal(t, want, got)
}
