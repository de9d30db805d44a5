package sqlite

import (
	"context"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/store"
	"github.com/agentwire/agentwire/internal/store/internal/groupcommit"
)

// TestFailedWriteIsUndoneAlone commits one batch holding a write that
// fails halfway, a claim and an append: the failed write leaves nothing
// behind and is reported to its caller only, the others are committed. It
// does so twice: the second time the savepoint statements and the writes
// run prepared (stmts).
func TestFailedWriteIsUndoneAlone(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, Options{Dir: t.TempDir()})
	require.NoError(t, err)
	defer s.Close()

	var unprepared int
	for _, th := range []string{"t", "u"} {
		unprepared = s.writer.unprepared
		bad := &groupcommit.Append{Write: write(func(ctx context.Context, tx wtx) error {
			if _, err := tx.ExecContext(ctx, `INSERT INTO thread_owners (thread, principal, since) VALUES (?, 'mallory', 0)`, th); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO runs (thread, run, node, since, expires) VALUES (?, 'x', 'n', 0, 1)`, "")
			if err == nil {
				_, err = tx.ExecContext(ctx, `INSERT INTO runs (thread, run, node, since, expires) VALUES (?, 'x', 'n', 0, 1)`, "")
			}
			return err // the second claim of thread "" fails its primary key
		})}
		good := &groupcommit.Append{Write: write(func(ctx context.Context, tx wtx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO runs (thread, run, node, since, expires) VALUES (?, 'r', 'n', 0, ?)`,
				th, time.Now().Add(time.Hour).UnixMicro())
			return err
		})}
		appended, err := groupcommit.Prepare(th, []event.Event{{Payload: event.RunCancelled{}}})
		require.NoError(t, err)
		require.NoError(t, s.flush(ctx, []*groupcommit.Append{bad, good, appended}))

		assert.ErrorContains(t, bad.Err, "UNIQUE constraint failed")
		assert.NoError(t, good.Err)
		_, owned, err := s.ThreadOwner(ctx, th)
		require.NoError(t, err)
		assert.False(t, owned, "the failed write's first statement is undone with it")
		_, ok, err := s.ActiveRun(ctx, "")
		require.NoError(t, err)
		assert.False(t, ok, "the failed write's second statement is undone with it")
		claim, ok, err := s.ActiveRun(ctx, th)
		require.NoError(t, err)
		require.True(t, ok, "the good write is committed")
		assert.Equal(t, store.RunClaim{Thread: th, Run: "r", Node: "n"}, store.RunClaim{Thread: claim.Thread, Run: claim.Run, Node: claim.Node})
		events, err := s.Read(ctx, th, 0, 10)
		require.NoError(t, err)
		require.Len(t, events, 1, "the append is committed")
		assert.Equal(t, int64(1), events[0].Seq)
	}
	assert.Equal(t, 7, s.writer.stmts.len(), "savepoint, rollback to, release, the owner, the bad and the good claim, a new thread")
	assert.Equal(t, unprepared, s.writer.unprepared, "the second round ran unprepared")
}

// TestClaimAndAppendInOneBatch commits, in one batch, a claim-and-append
// whose claim is refused (the thread is claimed), one whose claim is taken,
// and a plain append to the refused thread: the refused one appends
// nothing and leaves no gap in the seqs of the append beside it.
func TestClaimAndAppendInOneBatch(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, Options{Dir: t.TempDir()})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.ClaimRun(ctx, store.RunClaim{Thread: "busy", Run: "r0", Node: "n"}, time.Hour))

	user := func(thread, text string) *groupcommit.Append {
		a, err := groupcommit.Prepare(thread, []event.Event{{Payload: event.MessageUser{MessageID: text, Text: text}}})
		require.NoError(t, err)
		return a
	}
	refused := user("busy", "refused")
	refused.Write = claimWrite(store.RunClaim{Thread: "busy", Run: "r1", Node: "n"}, time.Hour)
	taken := user("free", "taken")
	taken.Write = claimWrite(store.RunClaim{Thread: "free", Run: "r2", Node: "n"}, time.Hour)
	plain := user("busy", "plain")
	require.NoError(t, s.flush(ctx, []*groupcommit.Append{refused, taken, plain}))

	assert.ErrorIs(t, refused.Err, store.ErrRunClaimed)
	assert.NoError(t, taken.Err)
	busy, err := s.Read(ctx, "busy", 0, 10)
	require.NoError(t, err)
	require.Len(t, busy, 1, "the refused claim's message is not appended")
	assert.Equal(t, int64(1), busy[0].Seq)
	assert.Equal(t, "plain", busy[0].Payload.(event.MessageUser).Text)
	free, err := s.Read(ctx, "free", 0, 10)
	require.NoError(t, err)
	require.Len(t, free, 1)
	assert.Equal(t, "taken", free[0].Payload.(event.MessageUser).Text)
	claim, ok, err := s.ActiveRun(ctx, "free")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "r2", claim.Run)

	// Through the store's own method: the claim is refused, nothing is
	// appended; on a free thread both are made.
	_, err = s.ClaimAndAppend(ctx, store.RunClaim{Thread: "free", Run: "r3", Node: "n"}, time.Hour,
		event.Event{Payload: event.MessageUser{MessageID: "m", Text: "again"}})
	require.ErrorIs(t, err, store.ErrRunClaimed)
	last, err := s.LastSeq(ctx, "free")
	require.NoError(t, err)
	assert.Equal(t, int64(1), last)
	committed, err := s.ClaimAndAppend(ctx, store.RunClaim{Thread: "new", Run: "r4", Node: "n"}, time.Hour,
		event.Event{Payload: event.MessageUser{MessageID: "m", Text: "first"}})
	require.NoError(t, err)
	require.Len(t, committed, 1)
	assert.Equal(t, int64(1), committed[0].Seq)
	claim, ok, err = s.ActiveRun(ctx, "new")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "r4", claim.Run)
}

// TestOwnersAloneDoNotSync commits a batch of owner records alone, which
// does not sync the disk, then one with an append beside them, which does
// (and with it the records before it), then the first again; with
// Synchronous NORMAL nothing syncs.
func TestOwnersAloneDoNotSync(t *testing.T) {
	for _, mode := range []string{"FULL", "NORMAL"} {
		t.Run(mode, func(t *testing.T) {
			ctx := t.Context()
			s, err := Open(ctx, Options{Dir: t.TempDir(), Synchronous: mode})
			require.NoError(t, err)
			defer s.Close()
			// synchronous reads the connection's setting within the
			// batch: 1 is NORMAL, 2 FULL.
			synchronous := func(into *int) *groupcommit.Append {
				return &groupcommit.Append{Write: laterWrite(func(ctx context.Context, tx wtx) error {
					return tx.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(into)
				})}
			}
			var alone, mixed, again int
			require.NoError(t, s.flush(ctx, []*groupcommit.Append{synchronous(&alone)}))
			appended, err := groupcommit.Prepare("t", []event.Event{{Payload: event.RunCancelled{}}})
			require.NoError(t, err)
			require.NoError(t, s.flush(ctx, []*groupcommit.Append{synchronous(&mixed), appended}))
			require.NoError(t, s.flush(ctx, []*groupcommit.Append{synchronous(&again)}))
			assert.Equal(t, 1, alone, "owner records alone are not synced")
			assert.Equal(t, map[string]int{"FULL": 2, "NORMAL": 1}[mode], mixed, "a batch with an append syncs as configured")
			assert.Equal(t, 1, again)

			// OwnThread is such a write, and still committed.
			owner, err := s.OwnThread(ctx, "t2", "alice")
			require.NoError(t, err)
			assert.Equal(t, "alice", owner)
			owner, ok, err := s.ThreadOwner(ctx, "t2")
			require.NoError(t, err)
			require.True(t, ok)
			assert.Equal(t, "alice", owner)
		})
	}
}

// BenchmarkClaimRun claims and releases runs from many goroutines at once,
// as simultaneous posts do: "group" through the group commit (ClaimRun,
// ReleaseRun), "alone" with each write its own transaction on the write
// connection, as they were made before.
func BenchmarkClaimRun(b *testing.B) {
	for _, mode := range []string{"alone", "group"} {
		b.Run(mode, func(b *testing.B) {
			ctx := b.Context()
			s, err := Open(ctx, Options{Dir: b.TempDir()})
			require.NoError(b, err)
			defer s.Close()
			alone := func(q string, args ...any) error {
				_, err := s.wdb.ExecContext(ctx, q, args...)
				return err
			}
			var n atomic.Int64
			b.SetParallelism(50) // 100 goroutines on 2 cores
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					c := store.RunClaim{Thread: fmt.Sprint("t", n.Add(1)), Run: "r", Node: "n"}
					if mode == "group" {
						require.NoError(b, s.ClaimRun(ctx, c, time.Minute))
						require.NoError(b, s.ReleaseRun(ctx, c))
						continue
					}
					require.NoError(b, alone(`INSERT INTO runs (thread, run, node, since, expires) VALUES (?, ?, ?, 0, 1)
						ON CONFLICT (thread) DO NOTHING`, c.Thread, c.Run, c.Node))
					require.NoError(b, alone(`DELETE FROM runs WHERE thread = ? AND run = ? AND node = ?`, c.Thread, c.Run, c.Node))
				}
			})
		})
	}
}

// BenchmarkOwnThread makes new threads' owners one after another, as a
// client's first request to each does: "synced" as a write that syncs the
// disk (as OwnThread was made before), "later" as OwnThread makes them.
func BenchmarkOwnThread(b *testing.B) {
	for _, mode := range []string{"synced", "later"} {
		b.Run(mode, func(b *testing.B) {
			ctx := b.Context()
			s, err := Open(ctx, Options{Dir: b.TempDir()})
			require.NoError(b, err)
			defer s.Close()
			i := 0
			for b.Loop() {
				i++
				thread := fmt.Sprint("t", i)
				if mode == "later" {
					_, err = s.OwnThread(ctx, thread, "alice")
				} else {
					err = s.write(ctx, func(ctx context.Context, tx wtx) error {
						_, err := tx.ExecContext(ctx, `INSERT INTO thread_owners (thread, principal, since) VALUES (?, ?, ?)
							ON CONFLICT (thread) DO NOTHING`, thread, "alice", now())
						return err
					})
				}
				require.NoError(b, err)
			}
		})
	}
}

// post makes the store calls a post to a new thread makes: its owner, the
// reads of its owner, last seq and active run, the claim with the user's
// message, and the claim's release.
func post(ctx context.Context, s *Store, thread string) error {
	if _, err := s.OwnThread(ctx, thread, "alice"); err != nil {
		return err
	}
	if _, _, err := s.ThreadOwner(ctx, thread); err != nil {
		return err
	}
	if _, err := s.LastSeq(ctx, thread); err != nil {
		return err
	}
	if _, _, err := s.ActiveRun(ctx, thread); err != nil {
		return err
	}
	c := store.RunClaim{Thread: thread, Run: "r-" + thread, Node: "n"}
	msg := event.Event{Run: c.Run, Payload: event.MessageUser{MessageID: "m-" + thread, Text: "hi"}}
	if _, err := s.ClaimAndAppend(ctx, c, time.Minute, msg); err != nil {
		return err
	}
	return s.ReleaseRun(ctx, c)
}

// TestStatementsArePreparedOnce: after a first post, another post runs
// every statement prepared: nothing runs unprepared and nothing new is
// prepared, on the write connection or the read pool.
func TestStatementsArePreparedOnce(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, Options{Dir: t.TempDir()})
	require.NoError(t, err)
	defer s.Close()

	require.NoError(t, post(ctx, s, "t1"))
	writes, reads, unprepared := s.writer.stmts.len(), s.reads.len(), s.writer.unprepared
	assert.NotZero(t, unprepared, "the first post's writes run unprepared once")
	assert.GreaterOrEqual(t, writes, 6, "savepoint, release, owner, its read, claim, its release, new thread")
	assert.Equal(t, 3, reads, "owner, last seq, active run")

	for _, th := range []string{"t2", "t3", "t4"} {
		require.NoError(t, post(ctx, s, th))
	}
	assert.Equal(t, unprepared, s.writer.unprepared, "a statement ran unprepared again")
	assert.Equal(t, writes, s.writer.stmts.len())
	assert.Equal(t, reads, s.reads.len())
	assert.Empty(t, s.writer.unseen)

	// and what the posts wrote is there
	for _, th := range []string{"t1", "t4"} {
		owner, ok, err := s.ThreadOwner(ctx, th)
		require.NoError(t, err)
		assert.True(t, ok)
		assert.Equal(t, "alice", owner)
		seq, err := s.LastSeq(ctx, th)
		require.NoError(t, err)
		assert.Equal(t, int64(1), seq)
	}
	threads, err := s.Threads(ctx, "", 10)
	require.NoError(t, err)
	assert.Len(t, threads, 4)
}

// BenchmarkPostStatements makes the store calls of posts to new threads
// from many goroutines at once (post): "unprepared" runs unprepared every
// statement but those Open prepares (the event inserts, a thread's last
// seq, data_version, Read and History), as the store did before stmts;
// "prepared" as it does now. cpu-µs/op is the process's CPU time
// (user and system) per post, steadier than ns/op on a shared machine.
func BenchmarkPostStatements(b *testing.B) {
	for _, mode := range []string{"unprepared", "prepared"} {
		b.Run(mode, func(b *testing.B) {
			ctx := b.Context()
			s, err := Open(ctx, Options{Dir: b.TempDir()})
			require.NoError(b, err)
			defer s.Close()
			if mode == "unprepared" {
				s.reads, s.writer.stmts = nil, nil
			}
			var n atomic.Int64
			b.SetParallelism(50) // 100 goroutines on 2 cores
			cpu0 := cpuTime(b)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					require.NoError(b, post(ctx, s, fmt.Sprint("t", n.Add(1))))
				}
			})
			b.StopTimer()
			b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// cpuTime is the CPU time (user and system) the process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
