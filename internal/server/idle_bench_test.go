package server_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/server/servertest"
)

// idleSessions is how many sessions of each kind BenchmarkIdleSessions
// opens.
const idleSessions = 500

// BenchmarkIdleSessions measures what an idle session holds on the server:
// the live heap, the goroutine stacks and the goroutines, per session, for
// each protocol, against a naive relay measured in the same run. The
// relay's WebSocket is a coder/websocket accept and one read loop (a chat
// is answered from the reader with one frame); its event stream answers
// the headers and waits for the client to go. Both are served in this
// process by net/http, as agentwire is.
//
// The clients run in a process of their own (this test binary again, as
// TestIdleClient), so that only the server's memory is counted:
//
//   - agentchat: a socket at /ws that sent one short chat and got its
//     reply, each on a session of its own;
//   - ag2, loom, agentloop: a socket that sends nothing (agentloop's gets
//     its first frame, context_info);
//   - threads: an event stream (GET …/events) of a thread whose run waits
//     for an approval, so that the stream stays open.
//
// Run it with -benchtime=1x (one measurement per protocol takes seconds).
// AGENTWIRE_IDLE_PROFILE=folder also writes heap profiles of agentwire's
// sessions (heapProfile).
func BenchmarkIdleSessions(b *testing.B) {
	if os.Getenv("AGENTWIRE_IDLE_PROFILE") != "" {
		runtime.MemProfileRate = 1
	}
	srv := servertest.Start(b, servertest.Config(b, "--max-conns", "100000", "--max-conns-per-ip", "100000",
		"--run-rate", "0"), servertest.Options{})
	base := "http://" + srv.Addr("main")

	// A thread whose run waits for a person's approval: its event streams
	// stay open.
	thread := uuid.NewString()
	waitingThread(b, base, thread)

	relay := httptest.NewServer(http.HandlerFunc(relayHandler))
	defer relay.Close()

	ws := func(u string) string { return "ws" + strings.TrimPrefix(u, "http") }
	for _, k := range []struct {
		name, kind  string
		url, relayU string
	}{
		{"agentchat", "chat", ws(base) + "/ws", ws(relay.URL) + "/ws"},
		{"ag2", "ws", ws(base) + "/ws/default/ent/{chat}/user", ws(relay.URL) + "/ws"},
		{"loom", "ws", ws(base) + "/loom", ws(relay.URL) + "/ws"},
		{"agentloop", "ws1", ws(base) + "/agentloop", ws(relay.URL) + "/ws1"},
		{"threads", "sse", base + "/api/v1/threads/" + thread + "/events", relay.URL + "/events"},
	} {
		b.Run(k.name, func(b *testing.B) {
			var aw, rl idleCost
			for b.Loop() {
				// What the first sessions set up lazily is not every
				// session's cost.
				measureIdle(b, k.kind, k.url, 8, "")
				measureIdle(b, k.kind, k.relayU, 8, "")
				rl = measureIdle(b, k.kind, k.relayU, idleSessions, "")
				heapProfile(b, k.name+".before")
				aw = measureIdle(b, k.kind, k.url, idleSessions, k.name+".after")
			}
			b.ReportMetric(aw.heap, "heap-B/session")
			b.ReportMetric(aw.stack, "stack-B/session")
			b.ReportMetric(aw.goroutines, "goroutines/session")
			b.ReportMetric(aw.heap+aw.stack, "B/session")
			b.ReportMetric(rl.heap+rl.stack, "relay-B/session")
			b.ReportMetric(rl.heap, "relay-heap-B/session")
			b.ReportMetric(rl.stack, "relay-stack-B/session")
			b.ReportMetric(rl.goroutines, "relay-goroutines/session")
			b.ReportMetric((aw.heap+aw.stack)/(rl.heap+rl.stack), "x-relay")
		})
	}
}

// idleCost is what one idle session holds.
type idleCost struct{ heap, stack, goroutines float64 }

// measureIdle opens n sessions of kind at url from a client process, and
// returns what the server holds for each once they are idle. With
// AGENTWIRE_IDLE_PROFILE set to a folder, a heap profile is written there
// as profile when the sessions are idle (see heapProfile).
func measureIdle(b *testing.B, kind, url string, n int, profile string) idleCost {
	b.Helper()
	before := memNow()
	cmd := exec.Command(os.Args[0], "-test.run=^TestIdleClient$", "-test.count=1")
	cmd.Env = append(os.Environ(), "AGENTWIRE_IDLE_KIND="+kind, "AGENTWIRE_IDLE_URL="+url, "AGENTWIRE_IDLE_N="+strconv.Itoa(n))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			b.Errorf("idle client: %v\n%s", err, stderr.String())
		}
	}()
	sc := bufio.NewScanner(stdout)
	ready := false
	for sc.Scan() {
		if sc.Text() == "idle-client: ready" {
			ready = true
			break
		}
	}
	if !ready {
		stdin.Close()
		_ = cmd.Wait()
		b.Fatalf("idle client did not get ready:\n%s", stderr.String())
	}
	go io.Copy(io.Discard, stdout) //nolint:errcheck // ends when the client exits
	// The runs the chats started end, and the sockets' writers with them.
	time.Sleep(time.Second)
	after := memNow()
	if profile != "" {
		heapProfile(b, profile)
	}
	return idleCost{
		heap:       float64(after.heap-before.heap) / float64(n),
		stack:      float64(after.stack-before.stack) / float64(n),
		goroutines: float64(after.goroutines-before.goroutines) / float64(n),
	}
}

// heapProfile writes a heap profile, after a collection, to name in the
// folder AGENTWIRE_IDLE_PROFILE names; without it, nothing. Compare two
// with go tool pprof -sample_index=inuse_space -diff_base before after.
func heapProfile(b *testing.B, name string) {
	dir := os.Getenv("AGENTWIRE_IDLE_PROFILE")
	if dir == "" {
		return
	}
	runtime.GC()
	f, err := os.Create(filepath.Join(dir, name+".pprof"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}

type memFigures struct{ heap, stack, goroutines int64 }

// memNow is the live heap, the goroutine stacks and the goroutines, after
// two collections (the first may leave finalizers' objects behind, and
// it shrinks the stacks that use less than a quarter of their size).
func memNow() memFigures {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return memFigures{heap: int64(m.HeapInuse), stack: int64(m.StackInuse), goroutines: int64(runtime.NumGoroutine())}
}

// relayHandler is the naive relay: a WebSocket at /ws and /ws1 that reads
// until the socket ends (a chat is answered from the reader; /ws1 sends a
// first frame, as agentloop does), and an event stream at /events that
// holds the request until the client goes.
func relayHandler(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/ws", "/ws1":
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		ctx := r.Context()
		if r.URL.Path == "/ws1" {
			if err := c.Write(ctx, websocket.MessageText, []byte(`{"type":"hello"}`)); err != nil {
				return
			}
		}
		for {
			_, b, err := c.Read(ctx)
			if err != nil {
				return
			}
			if bytes.Contains(b, []byte(`"chat"`)) {
				if err := c.Write(ctx, websocket.MessageText, []byte(`{"type":"agent_message","message":"ok"}`)); err != nil {
					return
				}
			}
		}
	case "/events":
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		http.NewResponseController(w).Flush() //nolint:errcheck // the client's going ends it
		<-r.Context().Done()
	default:
		http.NotFound(w, r)
	}
}

// waitingThread starts a run on thread that waits for an approval, and
// returns once it does.
func waitingThread(b *testing.B, base, thread string) {
	b.Helper()
	resp, err := http.Post(base+"/api/v1/threads/"+thread, "application/json", strings.NewReader(`{"text":"demo approval"}`))
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		b.Fatalf("POST: %s\n%s", resp.Status, body)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "approval") {
			return
		}
	}
	b.Fatalf("the run did not ask for approval: %v", sc.Err())
}

// TestIdleClient is BenchmarkIdleSessions's client process; without its
// environment it is skipped. It opens AGENTWIRE_IDLE_N sessions of
// AGENTWIRE_IDLE_KIND at AGENTWIRE_IDLE_URL, says so on stdout, and holds
// them until stdin closes.
func TestIdleClient(t *testing.T) {
	kind, url := os.Getenv("AGENTWIRE_IDLE_KIND"), os.Getenv("AGENTWIRE_IDLE_URL")
	if kind == "" {
		t.Skip("BenchmarkIdleSessions's client process")
	}
	n, err := strconv.Atoi(os.Getenv("AGENTWIRE_IDLE_N"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var (
		mu      sync.Mutex
		closers []func()
		wg      sync.WaitGroup
		errs    = make(chan error, n)
		sem     = make(chan struct{}, 16)
	)
	defer func() {
		for _, c := range closers {
			c()
		}
	}()
	for range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, err := openIdle(ctx, kind, strings.ReplaceAll(url, "{chat}", uuid.NewString()))
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			closers = append(closers, c)
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	fmt.Println("idle-client: ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// openIdle opens one session and brings it to idle; the func closes it.
func openIdle(ctx context.Context, kind, url string) (func(), error) {
	if kind == "sse" {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return nil, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return func() { resp.Body.Close() }, nil
	}
	c, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", url, err)
	}
	c.SetReadLimit(-1)
	switch kind {
	case "ws1":
		if _, _, err := c.Read(ctx); err != nil {
			return nil, err
		}
	case "chat":
		frame := fmt.Sprintf(`{"type":"chat","message":"hello","session_id":%q}`, uuid.NewString())
		if err := c.Write(ctx, websocket.MessageText, []byte(frame)); err != nil {
			return nil, err
		}
		for {
			_, b, err := c.Read(ctx)
			if err != nil {
				return nil, err
			}
			if bytes.Contains(b, []byte(`"agent_message"`)) {
				break
			}
		}
	}
	return func() { c.CloseNow() }, nil
}

// TestIdleSocketsHoldOneGoroutine: an idle Loom, AgentLoop or agentchat
// socket holds one goroutine, its reader (the request's handler has
// returned; Loom's worker and AgentLoop's follow start only when there is
// something to do).
func TestIdleSocketsHoldOneGoroutine(t *testing.T) {
	srv := servertest.Start(t, servertest.Config(t), servertest.Options{})
	base := "ws://" + srv.Addr("main")
	const n = 20
	for _, k := range []struct{ name, kind, url string }{
		{"loom", "ws", base + "/loom"},
		{"agentloop", "ws1", base + "/agentloop"},
		{"agentchat", "ws", base + "/ws"},
	} {
		t.Run(k.name, func(t *testing.T) {
			ctx := t.Context()
			before := runtime.NumGoroutine()
			for range n {
				closeIt, err := openIdle(ctx, k.kind, k.url)
				require.NoError(t, err)
				t.Cleanup(closeIt)
			}
			// Each socket: the server's reader and the client's nothing
			// (coder/websocket's client holds no goroutine while it does
			// not read).
			require.Eventually(t, func() bool {
				return runtime.NumGoroutine()-before <= n+n/4
			}, 5*time.Second, 10*time.Millisecond, "%d sockets hold %d goroutines", n, runtime.NumGoroutine()-before)
		})
	}
}
