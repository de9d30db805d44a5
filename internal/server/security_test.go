package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/generated/agentchatapi"
	"github.com/agentwire/agentwire/internal/config"
	"github.com/agentwire/agentwire/internal/protocol/threads"
)

// The tests here try the server as an attacker would: from a web page on
// another site (DNS rebinding, cross-origin), without credentials or with
// someone else's, with slow and hostile input, and with more connections
// than it should hold.

// request sends an HTTP request with the given Host and headers and returns
// its status and body.
func request(t *testing.T, method, url, host string, body io.Reader, header http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, body)
	require.NoError(t, err)
	if host != "" {
		req.Host = host
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// upgrade tries a WebSocket handshake at url with header and returns the
// HTTP status the server answered (101 when it upgraded).
func upgrade(t *testing.T, url string, header http.Header, host string) (int, *websocket.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), frameTimeout)
	defer cancel()
	if host != "" {
		if header == nil {
			header = http.Header{}
		}
		header.Set("Host", host)
	}
	ws, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: header, Host: host})
	if err == nil {
		t.Cleanup(func() { _ = ws.CloseNow() })
		return http.StatusSwitchingProtocols, ws
	}
	require.NotNil(t, resp, "dial %s: %v", url, err)
	return resp.StatusCode, nil
}

// endpoints are the main listener's entry points, one per protocol, as
// (method, path) pairs; WebSockets are upgrades.
type endpoint struct {
	name, method, path string
	ws                 bool
}

func endpoints() []endpoint {
	thread := uuid.NewString()
	return []endpoint{
		{"agentchat", http.MethodGet, "/ws", true},
		{"agentloop", http.MethodGet, "/agentloop", true},
		{"ag2", http.MethodGet, "/ws/default/acme/" + thread + "/alice", true},
		{"loom", http.MethodGet, "/loom", true},
		{"loom at the root", http.MethodGet, "/", true},
		{"threads history", http.MethodGet, "/api/v1/threads/" + thread, false},
		{"threads post", http.MethodPost, "/api/v1/threads/" + thread, false},
		{"threads events", http.MethodGet, "/api/v1/threads/" + thread + "/events", false},
	}
}

func (e endpoint) try(t *testing.T, addr, host string, header http.Header) int {
	t.Helper()
	if e.ws {
		code, _ := upgrade(t, "ws://"+addr+e.path, header, host)
		return code
	}
	var body io.Reader
	if e.method == http.MethodPost {
		body = strings.NewReader(`{"text":"echo hi"}`)
		if header == nil {
			header = http.Header{}
		}
		header.Set("Content-Type", "application/json")
	}
	code, _ := request(t, e.method, "http://"+addr+e.path, host, body, header)
	return code
}

// TestHostAllowListClosesDNSRebinding: a request naming another host (a
// rebinding attacker's name that resolves to this machine) is refused
// before any protocol sees it; the loopback names and --allowed-hosts
// are served.
func TestHostAllowListClosesDNSRebinding(t *testing.T) {
	ts := startServer(t, testConfig(t, "--allowed-hosts", "agents.example.com"), Options{})
	addr := ts.Addr("main")
	_, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	for _, e := range endpoints() {
		t.Run(e.name, func(t *testing.T) {
			for _, host := range []string{"attacker.example:" + port, "attacker.example", "127.0.0.1.nip.io:" + port, "localhost.attacker.example:" + port} {
				hdr := http.Header{"Origin": {"http://" + host}}
				assert.Equal(t, http.StatusMisdirectedRequest, e.try(t, addr, host, hdr), "Host %s", host)
			}
			for _, host := range []string{"localhost:" + port, "127.0.0.1:" + port, "agents.example.com", "AGENTS.example.com:" + port} {
				assert.NotEqual(t, http.StatusMisdirectedRequest, e.try(t, addr, host, nil), "Host %s", host)
			}
		})
	}
	code, _ := request(t, http.MethodGet, "http://"+addr+"/healthz", "attacker.example:"+port, nil, nil)
	assert.Equal(t, http.StatusMisdirectedRequest, code, "health is behind the Host check too")
}

// logBuffer collects a server's log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// startLogged starts a server whose log (every level) is kept.
func startLogged(t *testing.T, cfg config.Config) (*testServer, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	s, err := New(context.Background(), cfg, slog.New(slog.NewTextHandler(io.MultiWriter(logs, testWriter{t}),
		&slog.HandlerOptions{Level: slog.LevelDebug})), Options{})
	require.NoError(t, err)
	ts := &testServer{Server: s, t: t, cfg: cfg}
	require.NoError(t, s.Start())
	t.Cleanup(func() {
		if !ts.stopped {
			ts.shutdown()
		}
	})
	return ts, logs
}

// TestForeignOriginIsRefused: a page on another site may not open a
// WebSocket or change state, even with an allowed Host; the refusal is
// logged with the flag that would allow it. Same-origin requests (the
// server's own pages) pass.
func TestForeignOriginIsRefused(t *testing.T) {
	ts, logs := startLogged(t, testConfig(t))
	addr := ts.Addr("main")
	for _, e := range endpoints() {
		t.Run(e.name, func(t *testing.T) {
			for _, origin := range []string{"http://evil.example", "http://localhost:5173", "http://127.0.0.1:1", "null"} {
				code := e.try(t, addr, "", http.Header{"Origin": {origin}})
				if e.ws || e.method == http.MethodPost {
					assert.Equal(t, http.StatusForbidden, code, "Origin %s", origin)
				} else {
					assert.NotEqual(t, http.StatusForbidden, code, "a GET without side effects is not refused for its Origin %s", origin)
				}
			}
			assert.NotEqual(t, http.StatusForbidden, e.try(t, addr, "", http.Header{"Origin": {"http://" + addr}}), "same origin")
		})
	}
	assert.Contains(t, logs.String(), "--allowed-origins http://evil.example would allow it")
}

// TestAllowedOriginChatsCrossOrigin is the frontend developer's case: a
// Vite app on http://localhost:5173 chats over agentchat and the threads
// API once --allowed-origins names it, including the CORS preflight a
// browser sends for the threads POST and for Last-Event-ID.
func TestAllowedOriginChatsCrossOrigin(t *testing.T) {
	const origin = "http://localhost:5173"
	ts := startServer(t, testConfig(t, "--allowed-origins", origin), Options{})
	addr := ts.Addr("main")

	code, ws := upgrade(t, "ws://"+addr+"/ws", http.Header{"Origin": {origin}}, "")
	require.Equal(t, http.StatusSwitchingProtocols, code)
	c := &wsClient{t: t, ws: ws}
	c.chat("echo from vite", "vite-session")
	c.expect(userMessage("echo from vite"), agentMessage("You said: echo from vite"))

	thread := "/api/v1/threads/" + uuid.NewString()
	preflight := func(origin string) http.Header {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodOptions, "http://"+addr+thread, nil)
		require.NoError(t, err)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", http.MethodPost)
		req.Header.Set("Access-Control-Request-Headers", "authorization,content-type,last-event-id")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Less(t, resp.StatusCode, 300, "preflight status")
		return resp.Header
	}
	h := preflight(origin)
	assert.Equal(t, origin, h.Get("Access-Control-Allow-Origin"))
	assert.Contains(t, h.Get("Access-Control-Allow-Methods"), http.MethodPost)
	allowed := strings.ToLower(h.Get("Access-Control-Allow-Headers"))
	for _, name := range []string{"content-type", "last-event-id", "authorization"} {
		assert.Contains(t, allowed, name)
	}
	assert.Empty(t, preflight("http://evil.example").Get("Access-Control-Allow-Origin"), "another origin gets no CORS grant")

	status, body := request(t, http.MethodPost, "http://"+addr+thread, "", strings.NewReader(`{"text":"echo cors"}`),
		http.Header{"Origin": {origin}, "Content-Type": {"application/json"}})
	assert.Equal(t, http.StatusOK, status, body)
	assert.Contains(t, body, `"chunk":"cors"`)
	assert.Contains(t, body, "event: done")
}

// keysConfig is a server with API keys for alice and bob.
func keysConfig(t *testing.T, args ...string) (cfg config.Config, alice, bob string) {
	t.Helper()
	alice, bob = "ak-"+uuid.NewString(), "bk-"+uuid.NewString()
	file := filepath.Join(t.TempDir(), "keys")
	require.NoError(t, os.WriteFile(file, []byte("# test keys\nalice="+alice+"\nbob = "+bob+"\n"), 0o600))
	return testConfig(t, append([]string{"--auth", "keys", "--api-keys-file", file}, args...)...), alice, bob
}

func bearer(cred string) http.Header { return http.Header{"Authorization": {"Bearer " + cred}} }

// TestEveryProtocolRequiresCredentials: under --auth keys nothing but the
// health endpoints answers without a valid credential, and WebSockets are
// refused before the upgrade; the three ways to carry a credential work.
func TestEveryProtocolRequiresCredentials(t *testing.T) {
	cfg, alice, _ := keysConfig(t)
	ts, logs := startLogged(t, cfg)
	addr := ts.Addr("main")
	for _, e := range endpoints() {
		t.Run(e.name, func(t *testing.T) {
			assert.Equal(t, http.StatusUnauthorized, e.try(t, addr, "", nil), "no credential")
			assert.Equal(t, http.StatusUnauthorized, e.try(t, addr, "", bearer("not-a-key")), "wrong key")
			assert.Equal(t, http.StatusUnauthorized, e.try(t, addr, "", http.Header{"Authorization": {"Basic " + alice}}), "not a bearer")
			assert.NotEqual(t, http.StatusUnauthorized, e.try(t, addr, "", bearer(alice)), "header")
		})
	}
	code, _ := request(t, http.MethodGet, "http://"+addr+"/healthz", "", nil, nil)
	assert.Equal(t, http.StatusOK, code)
	code, _ = request(t, http.MethodGet, "http://"+addr+"/readyz", "", nil, nil)
	assert.Equal(t, http.StatusOK, code)

	// A browser cannot set headers on a WebSocket: the credential rides in
	// a subprotocol entry, and the server selects "agentwire".
	ctx := t.Context()
	ws, _, err := websocket.Dial(ctx, "ws://"+addr+"/ws", &websocket.DialOptions{Subprotocols: []string{"agentwire", "bearer." + alice}})
	require.NoError(t, err)
	defer ws.CloseNow()
	assert.Equal(t, "agentwire", ws.Subprotocol())
	c := &wsClient{t: t, ws: ws}
	c.chat("echo subprotocol", "")
	c.expect(userMessage("echo subprotocol"), agentMessage("You said: echo subprotocol"))

	code, _ = upgrade(t, "ws://"+addr+"/agentloop?token="+alice, nil, "")
	assert.Equal(t, http.StatusSwitchingProtocols, code, "?token=")
	code, _ = upgrade(t, "ws://"+addr+"/agentloop?token=wrong", nil, "")
	assert.Equal(t, http.StatusUnauthorized, code)

	assert.NotContains(t, logs.String(), alice, "a credential reached the log")
	assert.NotContains(t, logs.String(), "not-a-key", "a refused credential reached the log")
}

// TestAnotherPrincipalsThreadIsNotFound: bob, authenticated, names
// alice's thread on every protocol and learns nothing: 404 on the threads
// API, an error and close 1008 on the WebSockets, and nothing of the
// conversation. Alice still sees it all.
func TestAnotherPrincipalsThreadIsNotFound(t *testing.T) {
	cfg, alice, bob := keysConfig(t)
	ts := startServer(t, cfg, Options{})
	addr := ts.Addr("main")
	id := uuid.New()
	secret := "echo the launch code is " + uuid.NewString()

	ac, err := threads.NewClient("http://"+addr, &http.Client{Transport: authTransport(alice)})
	require.NoError(t, err)
	stream, err := ac.SendMessage(t.Context(), id, secret)
	require.NoError(t, err)
	for {
		_, err := stream.Next(t.Context())
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
	}
	stream.Close()

	bc, err := threads.NewClient("http://"+addr, &http.Client{Transport: authTransport(bob)})
	require.NoError(t, err)
	_, err = bc.History(t.Context(), id)
	var apiErr *threads.APIError
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusNotFound, apiErr.StatusCode)
	_, err = bc.SendMessage(t.Context(), id, "echo mine now")
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusNotFound, apiErr.StatusCode)
	_, err = bc.Resume(t.Context(), id, "")
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusNotFound, apiErr.StatusCode)

	for _, url := range []string{
		"ws://" + addr + "/ws",
		"ws://" + addr + "/agentloop?thread_id=" + id.String(),
		"ws://" + addr + "/ws/default/acme/" + id.String() + "/bob",
	} {
		code, ws := upgrade(t, url, bearer(bob), "")
		require.Equal(t, http.StatusSwitchingProtocols, code, url)
		if strings.HasSuffix(url, "/ws") {
			require.NoError(t, writeFrame(ws, chatFrame("echo hello", id.String())))
		}
		var got []string
		ctx, cancel := context.WithTimeout(t.Context(), frameTimeout)
		for {
			_, b, err := ws.Read(ctx)
			if err != nil {
				assert.Equal(t, websocket.StatusPolicyViolation, websocket.CloseStatus(err), "%s: %v", url, err)
				break
			}
			got = append(got, string(b))
		}
		cancel()
		if !strings.Contains(url, "/acme/") {
			// AG2 refuses with the close alone: its document sends
			// nothing of a chat to a socket outside its scope.
			assert.NotEmpty(t, got, "%s: the refusal is explained", url)
		}
		for _, f := range got {
			assert.NotContains(t, f, "launch code", "%s leaked alice's thread", url)
			assert.Contains(t, strings.ToLower(f), "not found", url)
		}
	}

	// Loom: a run naming alice's thread is refused with an error, and
	// nothing of the thread comes back.
	code, ws := upgrade(t, "ws://"+addr+"/loom", bearer(bob), "")
	require.Equal(t, http.StatusSwitchingProtocols, code)
	require.NoError(t, writeFrame(ws, []byte(`{"type":"run","id":"r1","agent":"react","message":"echo mine","thread_id":"`+id.String()+`"}`)))
	ctx, cancel := context.WithTimeout(t.Context(), frameTimeout)
	_, b, err := ws.Read(ctx)
	cancel()
	require.NoError(t, err)
	assert.Contains(t, string(b), `"type":"error"`)
	assert.Contains(t, strings.ToLower(string(b)), "not found")
	assert.NotContains(t, string(b), "launch code")

	h, err := ac.History(t.Context(), id)
	require.NoError(t, err)
	assert.Len(t, h.Messages, 2, "bob changed nothing")
}

// authTransport adds a bearer credential to every request.
type authTransport string

func (a authTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(a))
	return http.DefaultTransport.RoundTrip(r)
}

// TestJWTs: HS256 tokens from AGENTWIRE_JWT_SECRET with an audience; an
// expired token, one for another audience, one without exp, one signed
// with another secret and an unsigned one are refused with a reason that
// does not repeat them.
func TestJWTs(t *testing.T) {
	secret := "s3cret-" + uuid.NewString()
	env := map[string]string{"AGENTWIRE_JWT_SECRET": secret}
	cfg, err := config.Parse([]string{
		"--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--workdir", t.TempDir(),
		"--scenario", "testdata/agentchat.yaml", "--auth", "jwt", "--jwt-audience", "agentwire",
	}, func(k string) string { return env[k] }, io.Discard)
	require.NoError(t, err)
	ts, logs := startLogged(t, cfg)
	addr := ts.Addr("main")

	sign := func(method jwt.SigningMethod, key any, claims jwt.MapClaims) string {
		s, err := jwt.NewWithClaims(method, claims).SignedString(key)
		require.NoError(t, err)
		return s
	}
	now := time.Now()
	good := sign(jwt.SigningMethodHS256, []byte(secret), jwt.MapClaims{"sub": "carol", "aud": "agentwire", "exp": now.Add(time.Hour).Unix()})
	cases := []struct {
		name, token, reason string
	}{
		{"expired", sign(jwt.SigningMethodHS256, []byte(secret), jwt.MapClaims{"sub": "carol", "aud": "agentwire", "exp": now.Add(-time.Hour).Unix()}), "expired"},
		{"other audience", sign(jwt.SigningMethodHS256, []byte(secret), jwt.MapClaims{"sub": "carol", "aud": "billing", "exp": now.Add(time.Hour).Unix()}), "audience"},
		{"no exp", sign(jwt.SigningMethodHS256, []byte(secret), jwt.MapClaims{"sub": "carol", "aud": "agentwire"}), "exp"},
		{"other secret", sign(jwt.SigningMethodHS256, []byte("guess"), jwt.MapClaims{"sub": "carol", "aud": "agentwire", "exp": now.Add(time.Hour).Unix()}), "signature"},
		{"alg none", sign(jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, jwt.MapClaims{"sub": "carol", "aud": "agentwire", "exp": now.Add(time.Hour).Unix()}), "signature"},
		{"no subject", sign(jwt.SigningMethodHS256, []byte(secret), jwt.MapClaims{"aud": "agentwire", "exp": now.Add(time.Hour).Unix()}), "subject"},
		{"garbage", "a.b.c", "malformed"},
	}
	url := "http://" + addr + "/api/v1/threads/" + uuid.NewString()
	for _, c := range cases {
		code, body := request(t, http.MethodGet, url, "", nil, bearer(c.token))
		assert.Equal(t, http.StatusUnauthorized, code, c.name)
		assert.Contains(t, body, c.reason, c.name)
		assert.NotContains(t, body, c.token, c.name)
		assert.NotContains(t, logs.String(), c.token, c.name)
	}
	code, body := request(t, http.MethodPost, url, "", strings.NewReader(`{"text":"echo jwt"}`),
		http.Header{"Authorization": {"Bearer " + good}, "Content-Type": {"application/json"}})
	assert.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `"chunk":"jwt"`)
	assert.Contains(t, body, "event: done")
	assert.NotContains(t, logs.String(), good)
	assert.NotContains(t, logs.String(), secret)
}

// TestSlowBodyIsCutOff: a client that sends headers and then trickles (or
// withholds) the body loses the connection after --body-timeout.
func TestSlowBodyIsCutOff(t *testing.T) {
	ts := startServer(t, testConfig(t, "--body-timeout", "1s"), Options{})
	conn, err := net.Dial("tcp", ts.Addr("main"))
	require.NoError(t, err)
	defer conn.Close()
	path := "/api/v1/threads/" + uuid.NewString()
	_, err = fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"message\":", path, ts.Addr("main"))
	require.NoError(t, err)
	// The test's own bound, far beyond the server's: the server must end
	// the request, not this deadline.
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(time.Minute)))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err == nil {
		resp.Body.Close()
		assert.GreaterOrEqual(t, resp.StatusCode, 400, "a truncated body is not accepted")
		_, err = conn.Read(make([]byte, 1))
	}
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "the server held the slow request open: %v", err)
}

// TestStreamOutlivesBodyTimeout: the body deadline covers reading the
// request, not the SSE answer that follows; a run streaming for longer
// than --body-timeout reaches its end.
func TestStreamOutlivesBodyTimeout(t *testing.T) {
	ts := startServer(t, testConfig(t, "--body-timeout", "1s"), Options{})
	client, err := threads.NewClient("http://"+ts.Addr("main"), nil)
	require.NoError(t, err)
	stream, err := client.SendMessage(t.Context(), uuid.New(), "linger a while")
	require.NoError(t, err)
	defer stream.Close()
	var text strings.Builder
	var last string
	for {
		e, err := stream.Next(t.Context())
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		last = string(e.Type)
		text.WriteString(e.AgentTextSSE.Data.Chunk)
	}
	assert.Equal(t, "done", last)
	assert.Contains(t, text.String(), "outlasts the body timeout")
}

// TestConnectionCaps: one client address holds at most --max-conns-per-ip
// connections; the next is closed at once, and a place frees up when one
// closes.
func TestConnectionCaps(t *testing.T) {
	ts := startServer(t, testConfig(t, "--max-conns-per-ip", "2"), Options{})
	url := ts.url()
	a := dial(t, url)
	b := dial(t, url)
	_, err := dialWS(url, nil)
	require.Error(t, err, "a third connection from one address")
	b.chat("echo still served", "")
	b.expect(userMessage("echo still served"), agentMessage("You said: echo still served"))
	require.NoError(t, a.ws.Close(websocket.StatusNormalClosure, ""))
	require.Eventually(t, func() bool {
		ws, err := dialWS(url, nil)
		if err != nil {
			return false
		}
		_ = ws.CloseNow()
		return true
	}, frameTimeout, 20*time.Millisecond, "the closed connection's place was not given back")
}

// TestHalfSentRequestsCannotHoldAnAddress: connections that never finish
// a request do not hold their address's places: a client with an open
// session and two half-sent requests from its address (at
// --max-conns-per-ip 2) still gets a second session, whose connection
// takes the oldest half-sent one's place (that one is closed); the
// established sessions count apart, and a third is refused.
func TestHalfSentRequestsCannotHoldAnAddress(t *testing.T) {
	ts := startServer(t, testConfig(t, "--max-conns-per-ip", "2"), Options{})
	url := ts.url()
	a := dial(t, url)
	var halves []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", ts.Addr("main"))
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		_, err = c.Write([]byte("GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\n"))
		require.NoError(t, err)
		halves = append(halves, c)
	}
	b := dial(t, url)
	b.chat("echo still served", "")
	b.expect(userMessage("echo still served"), agentMessage("You said: echo still served"))
	a.chat("echo me too", "")
	a.expect(userMessage("echo me too"), agentMessage("You said: echo me too"))

	require.NoError(t, halves[0].SetReadDeadline(time.Now().Add(frameTimeout)))
	_, err := halves[0].Read(make([]byte, 1))
	// Closed: an end of stream, or a reset when the server closed it before
	// reading the half request it had been sent (a busy machine).
	assert.True(t, errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET),
		"the oldest half-sent request's connection was closed, got %v", err)

	_, err = dialWS(url, nil)
	require.Error(t, err, "a third session from one address")
	assert.Contains(t, err.Error(), "503")
}

// TestBindSafety: without authentication the server serves loopback only,
// unless --insecure-no-auth says another layer authenticates.
func TestBindSafety(t *testing.T) {
	for _, c := range []struct {
		args []string
		ok   bool
	}{
		{[]string{"--addr", "0.0.0.0:0"}, false},
		{[]string{"--addr", "[::]:0"}, false},
		{[]string{"--listen", "agentloop=0.0.0.0:0"}, false},
		{[]string{"--addr", "0.0.0.0:0", "--insecure-no-auth"}, true},
		{[]string{"--addr", "localhost:0"}, true},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			s, err := New(context.Background(), testConfig(t, c.args...), slog.New(slog.NewTextHandler(io.Discard, nil)), Options{})
			require.NoError(t, err)
			err = s.Start()
			require.NoError(t, s.Shutdown(context.Background()))
			if c.ok {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), "--insecure-no-auth")
			assert.Contains(t, err.Error(), "--auth keys")
		})
	}
	cfg, _, _ := keysConfig(t, "--addr", "0.0.0.0:0")
	s, err := New(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), Options{})
	require.NoError(t, err)
	assert.NoError(t, s.Start(), "with keys any address may be served")
	require.NoError(t, s.Shutdown(context.Background()))
}

// TestInvalidUTF8TextFrameCloses1007: a text frame that is not UTF-8 ends
// the socket with 1007 (invalid frame payload data) on every WebSocket
// protocol.
func TestInvalidUTF8TextFrameCloses1007(t *testing.T) {
	ts := startServer(t, testConfig(t), Options{})
	for _, path := range []string{"/ws", "/agentloop"} {
		code, ws := upgrade(t, "ws://"+ts.Addr("main")+path, nil, "")
		require.Equal(t, http.StatusSwitchingProtocols, code)
		require.NoError(t, ws.Write(t.Context(), websocket.MessageText, []byte("{\"type\":\"chat\",\"message\":\"\xff\xfe\"}")))
		ctx, cancel := context.WithTimeout(t.Context(), frameTimeout)
		for {
			if _, _, err := ws.Read(ctx); err != nil {
				assert.Equal(t, websocket.StatusInvalidFramePayloadData, websocket.CloseStatus(err), "%s: %v", path, err)
				break
			}
		}
		cancel()
	}
}

// hostileFrames are inputs a fuzzing or malicious client sends: each must
// get the protocol's error, and the socket must go on serving.
var hostileFrames = []string{
	``,
	` `,
	`null`,
	`true`,
	`42`,
	`"chat"`,
	`[]`,
	`[{"type":"chat","message":"hi"}]`,
	`{`,
	`{"type":`,
	`{}`,
	`{"type":null}`,
	`{"type":42}`,
	`{"type":"chat"}`,
	`{"type":"chat","message":42}`,
	`{"type":"chat","message":null}`,
	`{"type":"chat","message":{"$ne":""}}`,
	`{"type":"__proto__","message":"x"}`,
	`{"type":"chat","message":"x","session_id":42}`,
	`{"type":"chat","message":"x","session_id":"../../etc/passwd"}`,
	`{"type":"chat","message":"x","session_id":"a b"}`,
	`{"type":"chat","message":"x","session_id":"` + strings.Repeat("s", 4096) + `"}`,
	`{"type":"user_input","payload":{"input":[{"type":"message","role":"user","content":[{"type":"input_image","image_url":"file:///etc/passwd"}]}]}}`,
	`{"type":"user_input","payload":{"input":"rm -rf /"}}`,
	`{"type":"approval_response","payload":{"review":"yes"}}`,
	`{"type":"approval_response","payload":{"review":"sudo"}}`,
	`{"type":"chat","message":"x","type":"ping"}`,
	`{"type":"chat","message":"` + strings.Repeat("\\u0000", 64) + `"}`,
	`{"type":"` + strings.Repeat("x", 10000) + `"}`,
	strings.Repeat(`[`, 100000),
}

// TestHostileFramesGetErrorsAndTheSocketSurvives sends every hostile frame
// to the agentchat and AgentLoop sockets: each answer is the protocol's
// error frame (agentchat: type error; AgentLoop: type error with
// payload.message), and afterwards the socket still chats.
func TestHostileFramesGetErrorsAndTheSocketSurvives(t *testing.T) {
	ts := startServer(t, testConfig(t), Options{})
	t.Run("agentchat", func(t *testing.T) {
		c := dial(t, ts.url())
		for _, f := range hostileFrames {
			if f == `{"type":"chat","message":"x","type":"ping"}` {
				continue // a duplicate member: decoded as its last value, a ping
			}
			c.send([]byte(f))
			m := c.next()
			e, ok := m.(agentchatapi.ErrorEvent)
			if !ok {
				// A well-formed chat to an unusual session is served: its
				// user echo comes first, then its answer.
				_, isUser := m.(agentchatapi.UserMessageEvent)
				require.True(t, isUser, "frame %.80q: got %#v", f, m)
				c.next()
				continue
			}
			assert.NotEmpty(t, e.Error, "frame %.80q", f)
		}
		c.chat("echo still here", "")
		c.expect(userMessage("echo still here"), agentMessage("You said: echo still here"))
	})
	t.Run("agentloop", func(t *testing.T) {
		code, ws := upgrade(t, "ws://"+ts.Addr("main")+"/agentloop", nil, "")
		require.Equal(t, http.StatusSwitchingProtocols, code)
		read := func() map[string]any {
			t.Helper()
			ctx, cancel := context.WithTimeout(t.Context(), frameTimeout)
			defer cancel()
			_, b, err := ws.Read(ctx)
			require.NoError(t, err)
			var m map[string]any
			require.NoError(t, json.Unmarshal(b, &m))
			return m
		}
		require.Equal(t, "context_info", read()["type"], "the first frame")
		for _, f := range hostileFrames {
			require.NoError(t, ws.Write(t.Context(), websocket.MessageText, []byte(f)))
			m := read()
			require.Equal(t, "error", m["type"], "frame %.80q: got %v", f, m)
			p, _ := m["payload"].(map[string]any)
			assert.NotEmpty(t, p["message"], "frame %.80q", f)
		}
		require.NoError(t, ws.Write(t.Context(), websocket.MessageText,
			[]byte(`{"id":"1","type":"get_context_info"}`)))
		assert.Equal(t, "context_info", read()["type"], "the socket still serves")
	})
	// AG2 answers each with chat.error (SCHEMA_VALIDATION_FAILED, or
	// RATE_LIMIT_EXCEEDED once the socket's bucket is empty); Loom with an
	// error frame. Both sockets then still serve.
	for _, c := range []struct {
		name, path, errType, alive, aliveType string
	}{
		{"ag2", "/ws/default/acme/hostile-chat/alice", "chat.error", "", ""},
		{"loom", "/loom", "error", `{"type":"ping","id":"p1"}`, "pong"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, ws := upgrade(t, "ws://"+ts.Addr("main")+c.path, nil, "")
			require.Equal(t, http.StatusSwitchingProtocols, code)
			read := func() map[string]any {
				t.Helper()
				ctx, cancel := context.WithTimeout(t.Context(), frameTimeout)
				defer cancel()
				_, b, err := ws.Read(ctx)
				require.NoError(t, err)
				var m map[string]any
				require.NoError(t, json.Unmarshal(b, &m))
				return m
			}
			for _, f := range hostileFrames {
				require.NoError(t, ws.Write(t.Context(), websocket.MessageText, []byte(f)))
				m := read()
				require.Equal(t, c.errType, m["type"], "frame %.80q: got %v", f, m)
			}
			if c.alive != "" {
				require.NoError(t, ws.Write(t.Context(), websocket.MessageText, []byte(c.alive)))
				assert.Equal(t, c.aliveType, read()["type"], "the socket still serves")
				return
			}
			// AG2: the socket is open (a ping at the WebSocket level).
			ctx, cancel := context.WithTimeout(t.Context(), frameTimeout)
			defer cancel()
			go func() { _, _, _ = ws.Read(ctx) }()
			assert.NoError(t, ws.Ping(ctx), "the socket still serves")
		})
	}
}

// TestSecretsStayOutOfOutput: a database password, API keys and the JWT
// secret appear nowhere in what the server writes (banner, log) nor in the
// environment of the commands its tools run.
func TestSecretsStayOutOfOutput(t *testing.T) {
	pg := os.Getenv("AGENTWIRE_TEST_POSTGRES_URL")
	if pg == "" {
		t.Skip("AGENTWIRE_TEST_POSTGRES_URL not set: no PostgreSQL to give a password to")
	}
	password := "pw-" + uuid.NewString()
	withPassword := strings.Replace(postgresURL(t), "postgres://postgres@", "postgres://postgres:"+password+"@", 1)
	require.Contains(t, withPassword, password, "the test URL has the user postgres")
	cfg, alice, bob := keysConfig(t, "--database-url", withPassword, "--approval-policy", "full-auto")
	cfg.JWTSecret = "jwt-" + uuid.NewString() // also kept out, though unused with keys
	ts, logs := startLogged(t, cfg)

	ws, _, err := websocket.Dial(t.Context(), "ws://"+ts.Addr("main")+"/agentloop", &websocket.DialOptions{HTTPHeader: bearer(alice)})
	require.NoError(t, err)
	defer ws.CloseNow()
	ws.SetReadLimit(16 << 20)
	in := `{"id":"1","type":"user_input","payload":{"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"show the environment"}]}]}}`
	require.NoError(t, ws.Write(t.Context(), websocket.MessageText, []byte(in)))
	var frames strings.Builder
	ctx, cancel := context.WithTimeout(t.Context(), frameTimeout)
	defer cancel()
	for !strings.Contains(frames.String(), `"agent_finished"`) {
		_, b, err := ws.Read(ctx)
		require.NoError(t, err, "frames so far: %s", frames.String())
		frames.Write(b)
	}
	require.Contains(t, frames.String(), "PATH=", "the command ran and printed its environment")
	for name, secret := range map[string]string{"database password": password, "alice's key": alice, "bob's key": bob, "JWT secret": cfg.JWTSecret} {
		assert.NotContains(t, ts.Banner(), secret, name)
		assert.NotContains(t, logs.String(), secret, name)
		assert.NotContains(t, frames.String(), secret, "%s reached a tool's environment", name)
	}
}

// hostileRequests are threads API requests that must get a 4xx with the
// API's JSON error, never a 5xx, a hang or a run.
func TestHostileThreadsRequests(t *testing.T) {
	ts := startServer(t, testConfig(t), Options{})
	base := "http://" + ts.Addr("main") + "/api/v1/threads/"
	id := uuid.NewString()
	json := http.Header{"Content-Type": {"application/json"}}
	cases := []struct {
		method, path, body string
		header             http.Header
	}{
		{"POST", id, ``, json},
		{"POST", id, `{`, json},
		{"POST", id, `null`, json},
		{"POST", id, `[]`, json},
		{"POST", id, `{}`, json},
		{"POST", id, `{"text":42}`, json},
		{"POST", id, `{"text":""}`, json},
		{"POST", id, `{"text":"   "}`, json},
		{"POST", id, `{"text":null}`, json},
		{"POST", id, `{"text":{"$gt":""}}`, json},
		{"POST", id, `{"text":"hi"}`, http.Header{"Content-Type": {"text/plain"}}},
		{"POST", id, `{"text":"` + strings.Repeat("a", 5<<20) + `"}`, json},
		{"POST", "not-a-uuid", `{"text":"hi"}`, json},
		{"POST", "..%2F..%2Fetc%2Fpasswd", `{"text":"hi"}`, json},
		{"POST", id + "%00", `{"text":"hi"}`, json},
		{"GET", "not-a-uuid", ``, nil},
		{"GET", id, ``, nil},
		{"GET", id + "/events", ``, http.Header{"Last-Event-ID": {"-5"}}},
		{"GET", id + "/events", ``, http.Header{"Last-Event-ID": {"abc"}}},
		{"GET", id + "/events", ``, http.Header{"Last-Event-ID": {"99999999999999999999999"}}},
		{"DELETE", id, ``, nil},
		{"PUT", id, `{"text":"hi"}`, json},
		{"POST", id, `{"text":"hi","text":"` + strings.Repeat("b", 10) + `"}`, http.Header{"Content-Type": {"application/xml"}}},
	}
	for _, c := range cases {
		code, body := request(t, c.method, base+c.path, "", strings.NewReader(c.body), c.header)
		assert.True(t, code >= 400 && code < 500, "%s %.60s %.60q: status %d %.200s", c.method, c.path, c.body, code, body)
	}
	h, err := ts.core.History(t.Context(), id)
	require.NoError(t, err)
	assert.Empty(t, h, "no hostile request started a run")
}

// TestReadingNeverClaimsAThread: bob reads a thread that does not exist
// yet on every protocol, and joins it without writing; none of that makes
// it his. Alice then posts to it and owns it, and bob's sockets, still
// joined, get nothing of it: they end as a join of another's thread does.
func TestReadingNeverClaimsAThread(t *testing.T) {
	cfg, alice, bob := keysConfig(t)
	ts := startServer(t, cfg, Options{})
	addr := ts.Addr("main")
	id := uuid.New()
	base := "http://" + addr + "/api/v1/threads/" + id.String()

	code, _ := request(t, http.MethodGet, base, "", nil, bearer(bob))
	assert.Equal(t, http.StatusNotFound, code)
	code, _ = request(t, http.MethodGet, base+"/events", "", nil, bearer(bob))
	assert.Equal(t, http.StatusNotFound, code)
	code, loom := upgrade(t, "ws://"+addr+"/loom", bearer(bob), "")
	require.Equal(t, http.StatusSwitchingProtocols, code)
	require.NoError(t, writeFrame(loom, []byte(`{"type":"user_messages","id":"q1","thread_id":"`+id.String()+`"}`)))
	ctx, cancel := context.WithTimeout(t.Context(), frameTimeout)
	_, reply, err := loom.Read(ctx)
	cancel()
	require.NoError(t, err)
	assert.NotContains(t, string(reply), `"type":"error"`, "an unknown thread's messages are none")
	joins := map[string]*websocket.Conn{}
	for name, url := range map[string]string{
		"agentloop": "ws://" + addr + "/agentloop?thread_id=" + id.String(),
		"ag2":       "ws://" + addr + "/ws/default/acme/" + id.String() + "/bob",
	} {
		code, ws := upgrade(t, url, bearer(bob), "")
		require.Equal(t, http.StatusSwitchingProtocols, code, name)
		joins[name] = ws
	}

	secret := "echo the launch code is " + uuid.NewString()
	ac, err := threads.NewClient("http://"+addr, &http.Client{Transport: authTransport(alice)})
	require.NoError(t, err)
	stream, err := ac.SendMessage(t.Context(), id, secret)
	require.NoError(t, err, "alice posts to the thread bob only read")
	for {
		_, err := stream.Next(t.Context())
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
	}
	stream.Close()

	for name, ws := range joins {
		ctx, cancel := context.WithTimeout(t.Context(), frameTimeout)
		for {
			_, b, err := ws.Read(ctx)
			if err != nil {
				assert.Equal(t, websocket.StatusPolicyViolation, websocket.CloseStatus(err), "%s: %v", name, err)
				break
			}
			assert.NotContains(t, string(b), "launch code", "%s: bob's join got alice's thread", name)
		}
		cancel()
	}
	code, body := request(t, http.MethodGet, base, "", nil, bearer(bob))
	assert.Equal(t, http.StatusNotFound, code)
	assert.NotContains(t, body, "launch code")
	h, err := ac.History(t.Context(), id)
	require.NoError(t, err)
	assert.Len(t, h.Messages, 2, "alice's thread is hers")
}

// TestLoomRunIDsArePerPrincipal: run ids are the clients', so bob may pick
// the id alice's waiting run has, and start a run of his own under it;
// that captures nothing of hers: her answer from another of her sockets
// still reaches her run, and his answers and cancel naming the id reach
// nothing of hers.
func TestLoomRunIDsArePerPrincipal(t *testing.T) {
	cfg, alice, bob := keysConfig(t)
	ts := startServer(t, cfg, Options{})
	addr := ts.Addr("main")
	dial := func(key string) *websocket.Conn {
		code, ws := upgrade(t, "ws://"+addr+"/loom", bearer(key), "")
		require.Equal(t, http.StatusSwitchingProtocols, code)
		return ws
	}
	// read returns frames until one contains want.
	read := func(ws *websocket.Conn, want string) []string {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), frameTimeout)
		defer cancel()
		var got []string
		for {
			_, b, err := ws.Read(ctx)
			require.NoError(t, err, "waiting for %s after %q", want, got)
			got = append(got, string(b))
			if strings.Contains(string(b), want) {
				return got
			}
		}
	}
	// ask starts run r1 on ws and returns its approval's call id.
	ask := func(ws *websocket.Conn) string {
		require.NoError(t, writeFrame(ws, []byte(`{"type":"run","id":"r1","agent":"react","message":"make a file"}`)))
		frames := read(ws, `"tool_approval"`)
		var ask struct {
			Event struct {
				CallID string `json:"call_id"`
			} `json:"event"`
		}
		require.NoError(t, json.Unmarshal([]byte(frames[len(frames)-1]), &ask))
		require.NotEmpty(t, ask.Event.CallID)
		return ask.Event.CallID
	}
	a := dial(alice)
	call := ask(a)
	b := dial(bob)
	ask(b) // his own run r1, started after hers
	_, err := os.Stat(filepath.Join(cfg.Workdir, "approved.txt"))
	assert.ErrorIs(t, err, os.ErrNotExist, "a command ran unanswered")

	a2 := dial(alice)
	require.NoError(t, writeFrame(a2, []byte(`{"type":"tool_approval_response","id":"r1","call_id":"`+call+`","decision":"approve"}`)))
	read(a, `"type":"run_end"`)
	_, err = os.Stat(filepath.Join(cfg.Workdir, "approved.txt"))
	assert.NoError(t, err, "alice's approval from her other socket reached her run")

	require.NoError(t, writeFrame(b, []byte(`{"type":"cancel","id":"r1"}`)))
	got := read(b, `"type":"error"`)
	assert.Contains(t, got[len(got)-1], "cancel", "bob's cancel reached his own run")
}
