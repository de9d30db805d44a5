package sqlite_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
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
		func(t *testing.T) store.Store { return open(t, t.TempDir()) },
		storetest.WithReopen(func(t *testing.T) (store.Store, func(t *testing.T) store.Store) {
			dir := t.TempDir()
			return open(t, dir), func(t *testing.T) store.Store { return open(t, dir) }
		}))
}

func TestCrashDurability(t *testing.T) {
	if testing.Short() {
		t.Skip("kills 20 child processes")
	}
	storetest.Crash(t, t.TempDir(), func(ctx context.Context, dir string) (store.Log, error) {
		return sqlite.Open(ctx, sqlite.Options{Dir: dir})
	}, 20, nil)
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

// TestMigrationClaimsRunsLeftOpen opens a database of schema version 1 in
// which a crashed server left a run open: the migration to run claims gives
// that run a claim, so that the next server start ends it.
func TestMigrationClaimsRunsLeftOpen(t *testing.T) {
	dir := t.TempDir()
	db, err := sql.Open("sqlite", filepath.Join(dir, sqlite.FileName))
	require.NoError(t, err)
	v1, err := os.ReadFile("migrations/0001_events.sql")
	require.NoError(t, err)
	_, err = db.Exec(string(v1))
	require.NoError(t, err)
	_, err = db.Exec(`CREATE TABLE schema_migrations (version INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL, applied INTEGER NOT NULL) STRICT;
		INSERT INTO schema_migrations VALUES (1, '0001_events', 0)`)
	require.NoError(t, err)
	rows := []struct {
		thread string
		seq    int64
		run    string
		typ    event.Type
	}{
		{"t1", 1, "done", event.TypeRunStarted},
		{"t1", 2, "done", event.TypeRunCompleted},
		{"t1", 3, "dead", event.TypeRunStarted},
		{"t1", 4, "dead", event.TypeMessageDelta},
		{"t2", 1, "ok", event.TypeRunStarted},
		{"t2", 2, "ok", event.TypeRunCancelled},
	}
	for _, r := range rows {
		_, err = db.Exec(`INSERT INTO events (thread, seq, id, run, type, time, data) VALUES (?, ?, ?, ?, ?, ?, '{}')`,
			r.thread, r.seq, event.NewID(), r.run, string(r.typ), time.Now().UnixMicro())
		require.NoError(t, err)
	}
	require.NoError(t, db.Close())

	s := open(t, dir)
	claims, err := s.RunClaims(t.Context())
	require.NoError(t, err)
	require.Len(t, claims, 1, "claims %+v", claims)
	assert.Equal(t, "t1", claims[0].Thread)
	assert.Equal(t, "dead", claims[0].Run)
	assert.Equal(t, "unknown", claims[0].Node)
}

// TestMigrationKeepsSeqsWithoutLastSeq opens a database of schema version 3,
// whose threads row kept each thread's last seq: after the migration that
// drops it, the thread's last seq and last write come from its events and
// appends go on from there.
func TestMigrationKeepsSeqsWithoutLastSeq(t *testing.T) {
	dir := t.TempDir()
	db, err := sql.Open("sqlite", filepath.Join(dir, sqlite.FileName))
	require.NoError(t, err)
	_, err = db.Exec(`CREATE TABLE schema_migrations (version INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL, applied INTEGER NOT NULL) STRICT`)
	require.NoError(t, err)
	for i, name := range []string{"0001_events", "0002_runs", "0003_owners"} {
		m, err := os.ReadFile("migrations/" + name + ".sql")
		require.NoError(t, err)
		_, err = db.Exec(string(m))
		require.NoError(t, err, name)
		_, err = db.Exec(`INSERT INTO schema_migrations VALUES (?, ?, 0)`, i+1, name)
		require.NoError(t, err)
	}
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	last := created.Add(time.Minute)
	_, err = db.Exec(`INSERT INTO threads (id, last_seq, created, updated) VALUES ('t', 2, ?, ?)`, created.UnixMicro(), last.UnixMicro())
	require.NoError(t, err)
	for seq, at := range map[int64]time.Time{1: created, 2: last} {
		_, err = db.Exec(`INSERT INTO events (thread, seq, id, run, type, time, data) VALUES ('t', ?, ?, 'r', ?, ?, '{}')`,
			seq, event.NewID(), string(event.TypeRunCancelled), at.UnixMicro())
		require.NoError(t, err)
	}
	require.NoError(t, db.Close())

	s := open(t, dir)
	seq, err := s.LastSeq(t.Context(), "t")
	require.NoError(t, err)
	assert.Equal(t, int64(2), seq)
	threads, err := s.Threads(t.Context(), "", 10)
	require.NoError(t, err)
	require.Len(t, threads, 1)
	assert.Equal(t, store.ThreadInfo{ID: "t", LastSeq: 2, Created: created, Updated: last}, threads[0])
	got, err := s.Append(t.Context(), "t", event.Event{Payload: event.RunCancelled{}})
	require.NoError(t, err)
	assert.Equal(t, int64(3), got[0].Seq)
}
