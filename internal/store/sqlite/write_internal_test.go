package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"sync/atomic"
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
// behind and is reported to its caller only, the others are committed.
func TestFailedWriteIsUndoneAlone(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, Options{Dir: t.TempDir()})
	require.NoError(t, err)
	defer s.Close()

	bad := &groupcommit.Append{Write: write(func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO thread_owners (thread, principal, since) VALUES ('t', 'mallory', 0)`); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO no_such_table VALUES (1)`)
		return err
	})}
	good := &groupcommit.Append{Write: write(func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO runs (thread, run, node, since, expires) VALUES ('t', 'r', 'n', 0, ?)`,
			time.Now().Add(time.Hour).UnixMicro())
		return err
	})}
	appended, err := groupcommit.Prepare("t", []event.Event{{Payload: event.RunCancelled{}}})
	require.NoError(t, err)
	require.NoError(t, s.flush(ctx, []*groupcommit.Append{bad, good, appended}))

	assert.ErrorContains(t, bad.Err, "no_such_table")
	assert.NoError(t, good.Err)
	_, owned, err := s.ThreadOwner(ctx, "t")
	require.NoError(t, err)
	assert.False(t, owned, "the failed write's first statement is undone with it")
	claim, ok, err := s.ActiveRun(ctx, "t")
	require.NoError(t, err)
	require.True(t, ok, "the good write is committed")
	assert.Equal(t, store.RunClaim{Thread: "t", Run: "r", Node: "n"}, store.RunClaim{Thread: claim.Thread, Run: claim.Run, Node: claim.Node})
	events, err := s.Read(ctx, "t", 0, 10)
	require.NoError(t, err)
	require.Len(t, events, 1, "the append is committed")
	assert.Equal(t, int64(1), events[0].Seq)
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
