package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Hooks for the package's external tests.

// ThreadKey is threadKey.
var ThreadKey = threadKey

// SetThreadLocks sets how many threads a batch of s locks one by one
// before it takes the store-wide append lock instead.
func SetThreadLocks(s *Store, n int) { s.threadLocks = n }

// MigrateTo brings schema up to version upTo only.
func MigrateTo(ctx context.Context, pool *pgxpool.Pool, schema string, upTo int) (int, error) {
	return migrateSchema(ctx, pool, schema, upTo)
}

// CacheSeq makes s's writer believe thread's last seq is seq, learnt from
// the server started at server. Call it only while s is idle.
func CacheSeq(s *Store, server time.Time, thread string, seq int64) {
	s.seqs.learn(server, []string{thread}, []int64{seq})
}
