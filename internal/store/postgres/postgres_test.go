package postgres_test

import (
	"context"
	"fmt"
	neturl "net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/store"
	"github.com/agentwire/agentwire/internal/store/postgres"
	"github.com/agentwire/agentwire/internal/store/storetest"
)

const urlEnv = "AGENTWIRE_TEST_POSTGRES_URL"

func TestMain(m *testing.M) {
	storetest.CrashChild(func(ctx context.Context, schema string) (store.Log, error) {
		url, err := crashChildURL(os.Getenv(urlEnv), schema)
		if err != nil {
			return nil, err
		}
		return postgres.Open(ctx, url, postgres.Options{Schema: schema, MaxConns: 2})
	})
	code := m.Run()
	cleanupBench()
	os.Exit(code)
}

// dbURL returns the test server's URL or skips the test.
func dbURL(t testing.TB) string {
	t.Helper()
	url := os.Getenv(urlEnv)
	if url == "" {
		t.Skip(urlEnv + " not set: the PostgreSQL store is tested against a real server " +
			"(e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable)")
	}
	return url
}

// newSchema returns a fresh schema name, dropped when the test ends, so
// tests (and other packages' tests) sharing the server never see each
// other's tables.
func newSchema(t testing.TB) string {
	t.Helper()
	url := dbURL(t)
	name := "storetest_" + strings.ToLower(event.NewID())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Errorf("drop schema %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{name}.Sanitize()+` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", name, err)
		}
	})
	return name
}

func open(t *testing.T, schema string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(t.Context(), dbURL(t), postgres.Options{Schema: schema, MaxConns: 4})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

func TestStore(t *testing.T) {
	dbURL(t)
	storetest.Run(t,
		func(t *testing.T) store.Store { return open(t, newSchema(t)) },
		storetest.WithReopen(func(t *testing.T) (store.Store, func(t *testing.T) store.Store) {
			schema := newSchema(t)
			return open(t, schema), func(t *testing.T) store.Store { return open(t, schema) }
		}))
}

func TestCrashDurability(t *testing.T) {
	if testing.Short() {
		t.Skip("kills 20 child processes")
	}
	schema := newSchema(t)
	storetest.Crash(t, schema, func(ctx context.Context, schema string) (store.Log, error) {
		return postgres.Open(ctx, dbURL(t), postgres.Options{Schema: schema, MaxConns: 2})
	}, 20, func(t *testing.T) { endCrashChildSessions(t, schema) })
}

// crashChildURL is the URL a crash child of schema connects with: base
// with an application_name that endCrashChildSessions finds its sessions
// by.
func crashChildURL(base, schema string) (string, error) {
	u, err := neturl.Parse(base)
	if err != nil {
		return "", fmt.Errorf("parse %s: %w", urlEnv, err)
	}
	q := u.Query()
	q.Set("application_name", crashChildApp(schema))
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// crashChildApp is the application_name of the crash children of schema.
func crashChildApp(schema string) string { return "crash-" + schema }

// endCrashChildSessions ends the server sessions of a killed crash child
// of schema and waits until they are gone. A session outlives its killed
// client until it next reads or writes: one in the middle of a commit
// finishes it, after the kill, and the check must not start before it
// has (a LastSeq read after that commit once counted an event the read
// before it had not seen).
func endCrashChildSessions(t *testing.T, schema string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL(t))
	require.NoError(t, err)
	defer conn.Close(context.Background())
	app := crashChildApp(schema)
	_, err = conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, app)
	require.NoError(t, err)
	for {
		var n int
		require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n))
		if n == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d sessions of the killed crash child still open", n)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestSharedWriters appends to the same threads from 24 goroutines over four
// stores, each its own pool and writer, as four servers would.
func TestSharedWriters(t *testing.T) {
	schema := newSchema(t)
	storetest.SharedWriters(t, 24, open(t, schema), open(t, schema), open(t, schema), open(t, schema))
}

// TestConcurrentOpen starts several stores on a new schema at once, as
// servers starting together would: the migration runs once.
func TestConcurrentOpen(t *testing.T) {
	schema := newSchema(t)
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			s, err := postgres.Open(t.Context(), dbURL(t), postgres.Options{Schema: schema, MaxConns: 2})
			if err == nil {
				err = s.Close()
			}
			errs <- err
		}()
	}
	for range 4 {
		require.NoError(t, <-errs)
	}
	conn, err := pgx.Connect(t.Context(), dbURL(t))
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var rows, versions int
	require.NoError(t, conn.QueryRow(t.Context(),
		`SELECT count(*), count(DISTINCT version) FROM `+pgx.Identifier{schema, "schema_migrations"}.Sanitize()).Scan(&rows, &versions))
	require.Positive(t, versions)
	require.Equal(t, versions, rows, "each migration recorded once")
}

func TestOpenBadURL(t *testing.T) {
	_, err := postgres.Open(t.Context(), "postgres://%zz", postgres.Options{})
	require.Error(t, err)
}
