package server

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// --debug-addr serves the profiler and runtime metrics on a listener of
// its own, and the banner says where.
func TestDebugListenerServesProfilesAndMetrics(t *testing.T) {
	ts := startServer(t, testConfig(t, "--debug-addr", "127.0.0.1:0"), Options{})
	addr := ts.DebugAddr()
	require.NotEmpty(t, addr)
	require.NotEqual(t, ts.Addr("main"), addr)
	base := "http://" + addr
	assert.Contains(t, ts.Banner(), base+"/debug/pprof/")

	code, body := get(t, base+"/debug/pprof/")
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, "goroutine")
	assert.Contains(t, body, "heap")
	code, body = get(t, base+"/debug/pprof/goroutine?debug=1")
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, "goroutine profile:")
	code, body = get(t, base+"/debug/pprof/heap")
	require.Equal(t, http.StatusOK, code)
	assert.NotEmpty(t, body)
	code, body = get(t, base+"/debug/pprof/profile?seconds=1")
	require.Equal(t, http.StatusOK, code, body)
	assert.NotEmpty(t, body, "a CPU profile")
	code, _ = get(t, base+"/debug/pprof/cmdline")
	assert.Equal(t, http.StatusNotFound, code, "the command line can carry secrets")

	code, body = get(t, base+"/debug/vars")
	require.Equal(t, http.StatusOK, code, body)
	var vars map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(body), &vars), body)
	assert.Contains(t, vars, "memstats")
	assert.NotContains(t, vars, "cmdline")
	var own struct {
		Node       string `json:"node"`
		WebSockets *int   `json:"websockets"`
	}
	require.NoError(t, json.Unmarshal(vars["agentwire"], &own))
	assert.NotEmpty(t, own.Node)
	require.NotNil(t, own.WebSockets)

	// An open socket shows in the server's own numbers.
	c := dial(t, ts.url())
	c.chat("echo counted", "")
	c.expect(userMessage("echo counted"), agentMessage("You said: echo counted"))
	_, body = get(t, base+"/debug/vars")
	require.NoError(t, json.Unmarshal([]byte(body), &vars))
	require.NoError(t, json.Unmarshal(vars["agentwire"], &own))
	assert.Equal(t, 1, *own.WebSockets)

	code, body = get(t, base+"/debug/metrics")
	require.Equal(t, http.StatusOK, code, body)
	var metrics map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(body), &metrics), body)
	var goroutines uint64
	require.NoError(t, json.Unmarshal(metrics["/sched/goroutines:goroutines"], &goroutines))
	assert.Positive(t, goroutines)
	var pauses histogram
	require.NoError(t, json.Unmarshal(metrics["/sched/latencies:seconds"], &pauses))
	if pauses.Count > 0 {
		require.NotNil(t, pauses.P50)
		require.NotNil(t, pauses.Max)
		assert.LessOrEqual(t, *pauses.P50, *pauses.Max)
	}

	// The protocols are not served there, nor the profiler on the main
	// listener.
	code, _ = get(t, base+"/healthz")
	assert.Equal(t, http.StatusNotFound, code)
	code, _ = get(t, "http://"+ts.Addr("main")+"/debug/pprof/")
	assert.NotEqual(t, http.StatusOK, code)
}

// The debug listener answers only for the server's own names: a DNS
// rebinding page gets 421, and a cross-origin page cannot post to it.
func TestDebugListenerChecksHost(t *testing.T) {
	ts := startServer(t, testConfig(t, "--debug-addr", "localhost:0", "--allowed-origins", "http://localhost:5173"), Options{})
	base := "http://" + ts.DebugAddr()
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/vars", "/debug/metrics"} {
		code, _ := request(t, http.MethodGet, base+path, "attacker.example:6060", nil, nil)
		assert.Equal(t, http.StatusMisdirectedRequest, code, path)
		code, _ = request(t, http.MethodGet, base+path, "localhost:6060", nil, nil)
		assert.Equal(t, http.StatusOK, code, path)
	}
	code, _ := request(t, http.MethodPost, base+"/debug/pprof/symbol", "", strings.NewReader("0x1"),
		http.Header{"Origin": {"https://attacker.example"}})
	assert.Equal(t, http.StatusForbidden, code)
	// Even an allowed origin gets no CORS answer: profiles are not for pages.
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/debug/vars", nil)
	require.NoError(t, err)
	req.Header.Set("Origin", "http://localhost:5173")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	assert.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))
}

// An address other machines could reach is refused at start, before any
// listener is bound, whatever the authentication.
func TestDebugListenerIsLoopbackOnly(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "192.0.2.1:0", "example.com:0"} {
		t.Run(addr, func(t *testing.T) {
			cfg, _, _ := keysConfig(t, "--debug-addr", addr)
			s, err := New(context.Background(), cfg, slog.New(slog.DiscardHandler), Options{})
			require.NoError(t, err)
			err = s.Start()
			assert.Empty(t, s.Addr("main"), "nothing was bound")
			assert.Empty(t, s.DebugAddr())
			require.NoError(t, s.Shutdown(context.Background()))
			require.Error(t, err)
			assert.Contains(t, err.Error(), "--debug-addr "+addr)
			assert.Contains(t, err.Error(), "loopback")
		})
	}
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0", "localhost:0", "127.0.0.2:0"} {
		t.Run(addr, func(t *testing.T) {
			if err := checkDebugAddr(addr); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Without --debug-addr nothing else listens and nothing serves profiles.
func TestNoDebugListenerByDefault(t *testing.T) {
	ts := startServer(t, testConfig(t), Options{})
	assert.Empty(t, ts.DebugAddr())
	ts.mu.Lock()
	n := len(ts.servers)
	ts.mu.Unlock()
	assert.Equal(t, 1, n, "the main listener only")
	assert.NotContains(t, ts.Banner(), "debug")
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/vars", "/debug/metrics"} {
		code, _ := get(t, "http://"+ts.Addr("main")+path)
		assert.NotEqual(t, http.StatusOK, code, path)
	}
}

// Shutdown ends a CPU profile in progress at once: the client gets the
// profile so far, and the server stops without waiting the profile out.
func TestDebugListenerShutsDownWithTheServer(t *testing.T) {
	ts := startServer(t, testConfig(t, "--debug-addr", "127.0.0.1:0"), Options{})
	base := "http://" + ts.DebugAddr()

	type result struct {
		code int
		body []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := http.Get(base + "/debug/pprof/profile?seconds=600")
		if err != nil {
			done <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		done <- result{code: resp.StatusCode, body: b, err: err}
	}()
	require.Eventually(t, func() bool {
		_, body := get(t, base+"/debug/pprof/goroutine?debug=1")
		return strings.Contains(body, "net/http/pprof.Profile")
	}, frameTimeout, 20*time.Millisecond, "the profile never started")

	start := time.Now()
	ts.shutdown()
	assert.Less(t, time.Since(start), 4*time.Second, "shutdown waited for the profile")
	r := <-done
	require.NoError(t, r.err)
	assert.Equal(t, http.StatusOK, r.code)
	assert.NotEmpty(t, r.body, "the profile so far")
	_, err := http.Get(base + "/debug/pprof/")
	assert.Error(t, err, "the debug listener is closed")
}
