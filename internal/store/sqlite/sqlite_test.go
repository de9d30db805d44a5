package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/store"
	"github.com/agentwire/agentwire/internal/store/sqlite"
	"github.com/agentwire/agentwire/internal/store/storetest"
)

func TestMain(m *testing.M) {
	storetest.CrashChild(func(ctx context.Context, dir string) (store.Log, error) {
		return sqlite.Open(ctx, sqlite.Options{Dir: dir})
	})
	code := m.Run()
	cleanupBench()
	os.Exit(code)
}

func open(t *testing.T, dir string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), sqlite.Options{Dir: dir})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

func TestStore(t *testing.T) {
	storetest.Run(t,
		func(t *testing.T) store.Log { return open(t, t.TempDir()) },
		storetest.WithReopen(func(t *testing.T) (store.Log, func(t *testing.T) store.Log) {
			dir := t.TempDir()
			return open(t, dir), func(t *testing.T) store.Log { return open(t, dir) }
		}))
}

func TestCrashDurability(t *testing.T) {
	if testing.Short() {
		t.Skip("kills 20 child processes")
	}
	storetest.Crash(t, t.TempDir(), func(ctx context.Context, dir string) (store.Log, error) {
		return sqlite.Open(ctx, sqlite.Options{Dir: dir})
	}, 20)
}

// TestSharedWriters opens the same file three times, as three processes
// would: seqs come from the database, not from any writer's memory.
func TestSharedWriters(t *testing.T) {
	dir := t.TempDir()
	storetest.SharedWriters(t, 12, open(t, dir), open(t, dir), open(t, dir))
}

func TestOpenCreatesDirAndMigratesOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	s := open(t, dir)
	require.Equal(t, filepath.Join(dir, sqlite.FileName), s.Path())
	_, err := s.Append(t.Context(), "t", event.Event{Payload: event.RunCancelled{}})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	// Opening again finds the schema current and the data in place.
	s2 := open(t, dir)
	last, err := s2.LastSeq(t.Context(), "t")
	require.NoError(t, err)
	require.Equal(t, int64(1), last)
}

func TestOpenRejectsBadOptions(t *testing.T) {
	_, err := sqlite.Open(t.Context(), sqlite.Options{})
	require.Error(t, err, "no Dir")
	_, err = sqlite.Open(t.Context(), sqlite.Options{Dir: t.TempDir(), Synchronous: "OFF"})
	require.Error(t, err, "synchronous OFF would ack what a crash loses")
}
