package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/server"
	"github.com/agentwire/agentwire/internal/server/servertest"
	"github.com/agentwire/agentwire/internal/store/sqlite"
)

// budgetTimeout bounds each wait for a frame.
const budgetTimeout = 20 * time.Second

// turn is one protocol's way of sending a user turn and reading its frames
// until one contains any of ends; it returns that frame, whole.
type turn func(t *testing.T, addr, text string, ends ...string) string

// wsTurn sends frame (with text for %s) on a new socket at path and
// reads until a frame contains any of ends.
func wsTurn(path func() string, frame string) turn {
	return func(t *testing.T, addr, text string, ends ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), budgetTimeout)
		defer cancel()
		ws, _, err := websocket.Dial(ctx, "ws://"+addr+path(), nil)
		require.NoError(t, err)
		defer ws.CloseNow()
		b, _ := json.Marshal(text)
		require.NoError(t, ws.Write(ctx, websocket.MessageText, []byte(strings.ReplaceAll(frame, "%s", string(b)))))
		for {
			_, msg, err := ws.Read(ctx)
			require.NoError(t, err, "waiting for one of %q", ends)
			for _, end := range ends {
				if strings.Contains(string(msg), end) {
					return string(msg)
				}
			}
		}
	}
}

// threadsTurn posts text to a new thread and reads its SSE stream until
// an event contains any of ends; it returns that event's name and data.
func threadsTurn(t *testing.T, addr, text string, ends ...string) string {
	t.Helper()
	b, _ := json.Marshal(map[string]string{"text": text})
	resp, err := http.Post("http://"+addr+"/api/v1/threads/"+uuid.NewString(), "application/json", strings.NewReader(string(b)))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	name := ""
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if n, ok := strings.CutPrefix(line, "event: "); ok {
			name = n
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			for _, end := range ends {
				if strings.Contains("event: "+name+"\n"+data, end) {
					return "event: " + name + "\n" + data
				}
			}
		}
	}
	t.Fatalf("the stream ended without any of %q: %v", ends, sc.Err())
	return ""
}

// TestBudgetRefusesTheNextTurnOnEveryProtocol: with a budget of one token
// a day, a principal's first turn passes (nothing was spent before it)
// and spends more than that; its next turn is refused before its model
// call, with the protocol's own error frame naming the budget and when it
// resets. The refusal is a budget.exceeded event in the log, and the
// refusal counter of /metrics moves.
func TestBudgetRefusesTheNextTurnOnEveryProtocol(t *testing.T) {
	budgets := filepath.Join(t.TempDir(), "budgets.yaml")
	require.NoError(t, os.WriteFile(budgets, []byte("principals:\n  \"*\": {tokens_per_day: 1}\n"), 0o644))
	for _, c := range []struct {
		proto   string
		turn    turn
		done    string // what the end of a turn that passes contains
		refused string // what the error frame of a refused one contains
	}{
		{"agentchat", wsTurn(func() string { return "/ws" }, `{"type":"chat","message":%s}`), `"agent_message"`, `"type":"error"`},
		{"threads", threadsTurn, "event: done", "event: error"},
		{"agentloop", wsTurn(func() string { return "/agentloop" },
			`{"id":"1","type":"user_input","payload":{"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":%s}]}]}}`),
			`"agent_finished"`, `"type":"error"`},
		{"ag2", wsTurn(func() string { return "/ws/default/acme/" + uuid.NewString() + "/u" }, `{"type":"user.input.submit","text":%s}`),
			`"chat.run_complete"`, `"chat.error"`},
		{"loom", wsTurn(func() string { return "/loom" }, `{"type":"run","id":"r1","agent":"react","message":%s}`),
			`"run_end"`, `"type":"error"`},
	} {
		t.Run(c.proto, func(t *testing.T) {
			cfg := servertest.Config(t, "--budgets", budgets, "--metrics-addr", "127.0.0.1:0",
				"--scenario", "testdata/agentchat.yaml")
			s := servertest.Start(t, cfg, servertest.Options{})
			addr := s.Addr("main")
			refusals := func() string {
				resp, err := http.Get("http://" + s.MetricsAddr() + "/metrics")
				require.NoError(t, err)
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				for line := range strings.Lines(string(b)) {
					if strings.HasPrefix(line, `agentwire_budget_refusals_total{kind="tokens",window="day"}`) {
						return strings.TrimSpace(line)
					}
				}
				return ""
			}
			assert.Empty(t, refusals(), "no refusal yet")

			first := c.turn(t, addr, "echo one", c.done, c.refused)
			assert.Contains(t, first, c.done, "the first turn passes")

			second := c.turn(t, addr, "echo two", c.done, c.refused)
			require.Contains(t, second, c.refused, "the second turn is refused with the protocol's error")
			assert.Contains(t, second, "Budget exceeded")
			assert.Contains(t, second, "tokens_per_day")
			tomorrow := time.Now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
			assert.Contains(t, second, tomorrow.Format(time.RFC3339), "when it resets")

			assert.Equal(t, `agentwire_budget_refusals_total{kind="tokens",window="day"} 1`, refusals())

			s.Stop()
			st, err := sqlite.Open(t.Context(), sqlite.Options{Dir: cfg.DataDir})
			require.NoError(t, err)
			defer st.Close()
			threads, err := st.Threads(t.Context(), "", 100)
			require.NoError(t, err)
			var found []event.BudgetExceeded
			for _, th := range threads {
				evs, err := st.Read(t.Context(), th.ID, 0, 1000)
				require.NoError(t, err)
				for i, e := range evs {
					if ex, ok := e.Payload.(event.BudgetExceeded); ok {
						found = append(found, ex)
						require.Less(t, i+1, len(evs))
						failed, ok := evs[i+1].Payload.(event.RunFailed)
						require.True(t, ok, "run.failed follows budget.exceeded")
						assert.Equal(t, event.CodeBudgetExceeded, failed.Code)
						assert.Equal(t, ex.Message, failed.Message)
					}
				}
			}
			require.Len(t, found, 1, "one budget.exceeded in the log")
			assert.Equal(t, "anonymous", found[0].Principal)
			assert.Equal(t, "tokens_per_day", found[0].Limit)
			assert.Positive(t, found[0].Spent)
		})
	}
}

// A budgets file the server cannot enforce stops it from starting, with a
// message that names the file and what is wrong.
func TestBadBudgetsFileRefusesToStart(t *testing.T) {
	budgets := filepath.Join(t.TempDir(), "budgets.yaml")
	require.NoError(t, os.WriteFile(budgets, []byte("principals:\n  alice: {cost_per_day: 5}\n"), 0o644))
	cfg := servertest.Config(t, "--budgets", budgets)
	_, err := server.New(t.Context(), cfg, nil, server.Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), budgets)
	assert.Contains(t, err.Error(), "prices")
}

// Two servers sharing a PostgreSQL database hold a principal to one
// budget: what its turn on one node spent refuses its next turn on the
// other, in another thread.
func TestBudgetHoldsAcrossNodes(t *testing.T) {
	base := os.Getenv("AGENTWIRE_TEST_POSTGRES_URL")
	if base == "" {
		t.Skip("AGENTWIRE_TEST_POSTGRES_URL not set: no PostgreSQL to test against")
	}
	schema := "budget_" + strings.ToLower(event.NewID())
	conn, err := pgx.Connect(t.Context(), base)
	require.NoError(t, err)
	_, err = conn.Exec(t.Context(), "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize())
	require.NoError(t, err)
	require.NoError(t, conn.Close(t.Context()))
	t.Cleanup(func() {
		if conn, err := pgx.Connect(context.Background(), base); err == nil {
			_, _ = conn.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
			_ = conn.Close(context.Background())
		}
	})
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	budgets := filepath.Join(t.TempDir(), "budgets.yaml")
	require.NoError(t, os.WriteFile(budgets, []byte("principals:\n  anonymous: {tokens_per_month: 1}\n"), 0o644))
	node := func(name string) *servertest.Server {
		return servertest.Start(t, servertest.Config(t, "--database-url", base+sep+"search_path="+schema, "--node-id", name,
			"--budgets", budgets, "--scenario", "testdata/agentchat.yaml"), servertest.Options{})
	}
	a, b := node("a"), node("b")

	first := threadsTurn(t, a.Addr("main"), "echo one", "event: done", "event: error")
	assert.Contains(t, first, "event: done", "the first turn, on node a, passes")
	second := threadsTurn(t, b.Addr("main"), "echo two", "event: done", "event: error")
	assert.Contains(t, second, "event: error", "the next, on node b, is refused")
	assert.Contains(t, second, "tokens_per_month")
}
