package cli_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/cli"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/store"
	"github.com/agentwire/agentwire/internal/store/postgres"
	"github.com/agentwire/agentwire/internal/store/sqlite"
	"github.com/agentwire/agentwire/internal/store/storetest"
)

func openSQLite(t *testing.T, dir string) store.Store {
	t.Helper()
	st, err := sqlite.Open(t.Context(), sqlite.Options{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// openPostgres opens a fresh schema of the test server, or skips.
func openPostgres(t *testing.T) store.Store {
	t.Helper()
	url := os.Getenv("AGENTWIRE_TEST_POSTGRES_URL")
	if url == "" {
		t.Skip("AGENTWIRE_TEST_POSTGRES_URL not set: the SQLite to PostgreSQL round trip needs a PostgreSQL server")
	}
	schema := "cli_" + strings.ToLower(event.NewID())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if conn, err := pgx.Connect(ctx, url); err == nil {
			_, _ = conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`)
			_ = conn.Close(ctx)
		}
	})
	st, err := postgres.Open(t.Context(), url, postgres.Options{Schema: schema, MaxConns: 4})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// A thread of every event kind, owned by alice.
func seed(t *testing.T, st store.Store) string {
	t.Helper()
	const th = "550e8400-e29b-41d4-a716-446655440000"
	_, err := st.OwnThread(t.Context(), th, "alice")
	require.NoError(t, err)
	var evs []event.Event
	for i := range 3 {
		for _, typ := range event.Types {
			evs = append(evs, event.Event{Run: "run-" + string(rune('a'+i)), Payload: storetest.Sample(typ)})
		}
	}
	_, err = st.Append(t.Context(), th, evs...)
	require.NoError(t, err)
	return th
}

func export(t *testing.T, st store.Store, th string) string {
	t.Helper()
	var buf bytes.Buffer
	var calls int
	require.NoError(t, cli.Export(t.Context(), st, th, &buf, func(done, total int64) { calls++ }))
	assert.Positive(t, calls, "progress is reported")
	return buf.String()
}

// export then import round-trips a thread between SQLite and PostgreSQL:
// the export of the copy is the export of the original, byte for byte.
func TestExportImportRoundTrip(t *testing.T) {
	src := openSQLite(t, t.TempDir())
	th := seed(t, src)
	want := export(t, src, th)
	require.Equal(t, 1+3*len(event.Types), strings.Count(want, "\n"), "a header and a line an event")

	for name, open := range map[string]func(*testing.T) store.Store{
		"sqlite":   func(t *testing.T) store.Store { return openSQLite(t, t.TempDir()) },
		"postgres": openPostgres,
	} {
		t.Run(name, func(t *testing.T) {
			dst := open(t)
			got, n, err := cli.Import(t.Context(), dst, strings.NewReader(want), "", nil)
			require.NoError(t, err)
			assert.Equal(t, th, got)
			assert.EqualValues(t, 3*len(event.Types), n)
			assert.Equal(t, want, export(t, dst, th))
			owner, ok, err := dst.ThreadOwner(t.Context(), th)
			require.NoError(t, err)
			assert.True(t, ok)
			assert.Equal(t, "alice", owner)

			// Back again, into a fresh SQLite store.
			back := openSQLite(t, t.TempDir())
			_, _, err = cli.Import(t.Context(), back, strings.NewReader(export(t, dst, th)), "", nil)
			require.NoError(t, err)
			assert.Equal(t, want, export(t, back, th))

			// A thread that has events is not imported into.
			_, _, err = cli.Import(t.Context(), dst, strings.NewReader(want), "", nil)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "already has")
		})
	}
}

func TestImportRefusesBrokenInput(t *testing.T) {
	src := openSQLite(t, t.TempDir())
	th := seed(t, src)
	good := export(t, src, th)
	lines := strings.SplitAfter(good, "\n")
	for name, in := range map[string]string{
		"no header":      strings.Join(lines[1:], ""),
		"a gap":          lines[0] + lines[1] + strings.Join(lines[3:], ""),
		"another thread": lines[0] + strings.Replace(lines[1], th, "other", 1),
		"not JSON":       lines[0] + "{nope\n",
		"empty":          "",
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := cli.Import(t.Context(), openSQLite(t, t.TempDir()), strings.NewReader(in), "", nil)
			require.Error(t, err)
		})
	}
}

// The command line: ls, show and export through Threads, as the binary
// runs them.
func TestThreadsCommands(t *testing.T) {
	dir := t.TempDir()
	st := openSQLite(t, dir)
	th := seed(t, st)
	require.NoError(t, st.Close())
	getenv := func(k string) string { return map[string]string{"AGENTWIRE_DATA_DIR": dir}[k] }
	run := func(args ...string) (string, string, error) {
		var out, errOut bytes.Buffer
		err := cli.Threads(t.Context(), args, getenv, strings.NewReader(""), &out, &errOut)
		return out.String(), errOut.String(), err
	}
	out, _, err := run("ls")
	require.NoError(t, err)
	assert.Contains(t, out, th+"\t")
	assert.Contains(t, out, "events")

	out, _, err = run("show", th)
	require.NoError(t, err)
	assert.Contains(t, out, "user: ")

	file := t.TempDir() + "/t.jsonl"
	_, progress, err := run("export", "-o", file, th)
	require.NoError(t, err)
	assert.Contains(t, progress, "exported")
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, 1+3*len(event.Types), bytes.Count(b, []byte("\n")))

	_, _, err = run("show", "nope")
	require.Error(t, err)
	_, _, err = run("frobnicate")
	require.Error(t, err)
}

func TestValidate(t *testing.T) {
	frames := `{"type":"chat","message":"hi","session_id":"s"}
{"type":"agent_message","message":"hello"}
{"type":"agent_message"}
`
	var out, errOut bytes.Buffer
	err := cli.Validate([]string{"--protocol", "agentchat", "-"}, strings.NewReader(frames), &out, &errOut)
	require.ErrorIs(t, err, cli.ErrInvalid)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 3)
	assert.Equal(t, "-:1: valid agentchat inbound frame", lines[0])
	assert.Equal(t, "-:2: valid agentchat outbound frame", lines[1])
	assert.Contains(t, lines[2], "-:3: invalid")
	assert.Contains(t, lines[2], "message")

	out.Reset()
	require.NoError(t, cli.Validate([]string{"--protocol", "agentchat", "--direction", "outbound", "-"}, strings.NewReader(`{"type":"agent_message","message":"hello"}`), &out, &errOut))
	err = cli.Validate([]string{"--protocol", "nope", "-"}, strings.NewReader(`{}`), &out, &errOut)
	require.Error(t, err)
	assert.False(t, errors.Is(err, cli.ErrInvalid))
}
