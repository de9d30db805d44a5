package server

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scrape reads the metrics listener's /metrics.
func scrape(t *testing.T, ts *testServer) string {
	t.Helper()
	code, body := request(t, http.MethodGet, "http://"+ts.MetricsAddr()+"/metrics", "", nil, nil)
	require.Equal(t, http.StatusOK, code)
	return body
}

// converse sends frame on a new socket at url and reads until a frame
// contains end.
func converse(t *testing.T, url, frame, end string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), frameTimeout)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, url, nil)
	require.NoError(t, err, url)
	defer ws.CloseNow()
	require.NoError(t, ws.Write(ctx, websocket.MessageText, []byte(frame)))
	for {
		_, b, err := ws.Read(ctx)
		require.NoError(t, err, "%s: waiting for %s", url, end)
		if strings.Contains(string(b), end) {
			return
		}
	}
}

// TestMetricsMoveOnEveryProtocol scrapes /metrics on --metrics-addr after a
// turn with a tool call on each protocol: the connection, frame, run,
// model, tool, store, delivery and subscription series have moved, with
// their protocol, provider, tool and backend labels.
func TestMetricsMoveOnEveryProtocol(t *testing.T) {
	ts := startServer(t, testConfig(t, "--metrics-addr", "127.0.0.1:0"), Options{})
	before := scrape(t, ts)
	assert.NotContains(t, before, "agentwire_runs_started_total 1", "a run before any was started")
	addr := ts.Addr("main")

	converse(t, "ws://"+addr+"/ws", `{"type":"chat","message":"look around"}`, `"agent_message"`)
	resp, err := http.Post("http://"+addr+"/api/v1/threads/"+uuid.NewString(), "application/json", strings.NewReader(`{"text":"look around"}`))
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Contains(t, string(body), "event: done")
	converse(t, "ws://"+addr+"/agentloop", `{"id":"1","type":"user_input","payload":{"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"look around"}]}]}}`, `"agent_finished"`)
	converse(t, "ws://"+addr+"/ws/default/acme/"+uuid.NewString()+"/u", `{"type":"user.input.submit","text":"look around"}`, `"chat.run_complete"`)
	converse(t, "ws://"+addr+"/loom", `{"type":"run","id":"r1","agent":"react","message":"look around"}`, `"run_end"`)

	after := scrape(t, ts)
	has := func(want string) {
		t.Helper()
		assert.True(t, strings.Contains(after, want), "the scrape has no %s", want)
	}
	for _, proto := range []string{"agentchat", "threads", "agentloop", "ag2", "loom"} {
		has(`agentwire_connections_total{protocol="` + proto + `"}`)
		has(`agentwire_frames_sent_total{protocol="` + proto + `"}`)
	}
	for _, want := range []string{
		"agentwire_runs_started_total 5",
		`agentwire_runs_finished_total{outcome="completed"} 5`,
		`agentwire_model_call_seconds_count{model="scripted:agentchat-e2e",provider="scripted"}`,
		`agentwire_model_first_token_seconds_count{model="scripted:agentchat-e2e",provider="scripted"}`,
		`agentwire_tool_calls_total{tool="ls",verdict="ran"} 5`,
		`agentwire_tool_call_seconds_count{tool="read"} 5`,
		`agentwire_store_commit_seconds_count{backend="sqlite"}`,
		`agentwire_store_commit_events_bucket{backend="sqlite",le="1"}`,
		"agentwire_bus_deliver_lag_seconds_count",
		"agentwire_subscriptions_open",
		`agentwire_frames_received_total{protocol="loom"} 1`,
	} {
		has(want)
	}
	v, ok := ts.metrics.Sample("agentwire_model_tokens_total", map[string]string{"provider": "scripted", "direction": "in"})
	assert.True(t, ok)
	assert.Positive(t, v, "tokens in")
}

// TestMetricsAddrIsLoopbackOnly: --metrics-addr refuses what other
// machines could reach, as --debug-addr does.
func TestMetricsAddrIsLoopbackOnly(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", "[::]:0", "192.0.2.1:9464"} {
		srv, err := New(context.Background(), testConfig(t, "--metrics-addr", addr), nil, Options{})
		require.NoError(t, err)
		err = srv.Start()
		require.Error(t, err, addr)
		assert.Contains(t, err.Error(), "loopback", addr)
		require.NoError(t, srv.Shutdown(context.Background()))
	}
}
