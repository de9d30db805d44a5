package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/coder/websocket"
)

// The naive relay is the baseline: for each agentchat chat frame or
// threads POST it calls the upstream and passes every token on as it
// arrives, to every socket of the session or every subscriber of the
// thread, keeping nothing. It speaks the wire shapes agentwire speaks on
// the compared paths, so the loadgen's clients read both alike. It runs as
// a process of its own (`loadgen relay`) so that its CPU and memory are
// measured apart from the loadgen's.

// relayMain runs the relay until SIGINT or SIGTERM. It prints
// "relay listening on ADDR" once it accepts connections.
func relayMain(args []string) int {
	fs := flag.NewFlagSet("loadgen relay", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	up := fs.String("upstream", "", "base URL of the OpenAI-compatible upstream (…/v1)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *up == "" {
		fmt.Fprintln(os.Stderr, "loadgen relay: -upstream is required")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serveRelay(ctx, *addr, *up, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen relay:", err)
		return 1
	}
	return 0
}

// serveRelay serves until ctx is done, then closes every connection and
// waits for every goroutine it started.
func serveRelay(ctx context.Context, addr, upstreamURL string, stdout io.Writer) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rl := &relay{
		ctx:      rctx,
		upstream: strings.TrimSuffix(upstreamURL, "/") + "/chat/completions",
		hc: &http.Client{Transport: &http.Transport{
			MaxIdleConns: 4096, MaxIdleConnsPerHost: 4096, IdleConnTimeout: time.Minute,
		}},
		sessions: map[string]*chatSession{},
		threads:  map[string]*relayThread{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ws", rl.serveChat)
	mux.HandleFunc("POST /api/v1/threads/{id}", rl.servePost)
	mux.HandleFunc("GET /api/v1/threads/{id}/events", rl.serveEvents)
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ready\n") })
	srv := &http.Server{
		Handler:           rl.track(mux),
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return rctx },
	}
	serveErr := make(chan error, 1)
	rl.wg.Go(func() { serveErr <- srv.Serve(ln) })
	fmt.Fprintf(stdout, "relay listening on %s\n", ln.Addr())

	select {
	case <-ctx.Done():
	case err = <-serveErr:
	}
	cancel() // handlers and runs end; hijacked sockets close
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	_ = srv.Shutdown(sctx)
	_ = srv.Close()
	rl.wg.Wait()
	rl.hc.CloseIdleConnections()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

type relay struct {
	ctx      context.Context // cancelled at shutdown
	upstream string          // the chat completions URL
	hc       *http.Client
	wg       sync.WaitGroup // serve, every handler, every chat run

	mu       sync.Mutex
	sessions map[string]*chatSession
	threads  map[string]*relayThread
	nextMsg  int64 // numbers messages and ephemeral sessions
}

// track counts handlers in wg: http.Server.Shutdown does not wait for
// hijacked (WebSocket) connections.
func (rl *relay) track(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rl.wg.Add(1)
		defer rl.wg.Done()
		h.ServeHTTP(w, r)
	})
}

// complete calls the upstream with text and passes each content delta to
// onToken as it arrives.
func (rl *relay) complete(ctx context.Context, text string, onToken func(string)) error {
	body, err := json.Marshal(map[string]any{
		"model":    "relay",
		"stream":   true,
		"messages": []map[string]string{{"role": "user", "content": text}},
	})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rl.upstream, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := rl.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("upstream: HTTP %d", resp.StatusCode)
	}
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			if errors.Is(err, io.EOF) {
				return errors.New("upstream: stream ended without [DONE]")
			}
			return err
		}
		data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("data: "))
		if !ok {
			continue
		}
		if string(data) == "[DONE]" {
			return nil
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(data, &chunk); err != nil {
			return fmt.Errorf("upstream: %w", err)
		}
		for _, c := range chunk.Choices {
			if c.Delta.Content != "" {
				onToken(c.Delta.Content)
			}
		}
	}
}

// ---- agentchat ----

// chatSession is the sockets that chatted on one session_id.
type chatSession struct {
	conns map[*chatConn]struct{}
}

// chatConn is one socket, held as leanly as a relay can: its read
// goroutine and nothing else. Frames are written by whichever goroutine
// has them (the reply's, or the socket's own for its echo), one at a time
// (coder/websocket serialises writers), each with a deadline; a socket
// whose write fails or times out is dropped.
type chatConn struct {
	ws      *websocket.Conn
	chunks  bool // ?stream=chunks: one agent_message per token
	ctx     context.Context
	drop    context.CancelFunc // ends ctx: the socket's read, and its writes
	session string             // guarded by relay.mu
}

func (c *chatConn) send(b []byte) {
	ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
	err := c.ws.Write(ctx, websocket.MessageText, b)
	cancel()
	if err != nil {
		c.drop()
	}
}

func chatFrameJSON(typ, msg string) []byte {
	b, _ := json.Marshal(chatFrame{Type: typ, Message: msg})
	return b
}

func (rl *relay) serveChat(w http.ResponseWriter, r *http.Request) {
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	ws.SetReadLimit(1 << 20)
	ctx, cancel := context.WithCancel(rl.ctx)
	c := &chatConn{ws: ws, chunks: r.URL.Query().Get("stream") == "chunks", ctx: ctx, drop: cancel}
	defer func() {
		rl.leave(c)
		cancel()
		_ = ws.CloseNow()
	}()
	rl.mu.Lock()
	rl.nextMsg++
	ephemeral := "ephemeral-" + strconv.FormatInt(rl.nextMsg, 10)
	rl.mu.Unlock()
	for {
		_, b, err := ws.Read(ctx)
		if err != nil {
			return
		}
		var m struct {
			Type      string `json:"type"`
			Message   string `json:"message"`
			SessionID string `json:"session_id"`
		}
		if json.Unmarshal(b, &m) != nil || m.Type != "chat" {
			c.send(chatFrameJSON("error", "Invalid message"))
			continue
		}
		if strings.TrimSpace(m.Message) == "" {
			c.send(chatFrameJSON("error", "Empty message received"))
			continue
		}
		session := m.SessionID
		if session == "" {
			session = ephemeral
		}
		rl.join(c, session)
		rl.broadcast(session, chatFrameJSON("user_message", m.Message), nil)
		text := m.Message
		rl.wg.Go(func() { rl.runChat(session, text) })
	}
}

func (rl *relay) join(c *chatConn, session string) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if c.session == session {
		return
	}
	rl.leaveLocked(c)
	s := rl.sessions[session]
	if s == nil {
		s = &chatSession{conns: map[*chatConn]struct{}{}}
		rl.sessions[session] = s
	}
	s.conns[c] = struct{}{}
	c.session = session
}

func (rl *relay) leave(c *chatConn) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	rl.leaveLocked(c)
}

func (rl *relay) leaveLocked(c *chatConn) {
	if c.session == "" {
		return
	}
	if s := rl.sessions[c.session]; s != nil {
		delete(s.conns, c)
		if len(s.conns) == 0 {
			delete(rl.sessions, c.session)
		}
	}
	c.session = ""
}

// broadcast sends b to the session's sockets; only those whose chunks
// setting is want when want is not nil.
func (rl *relay) broadcast(session string, b []byte, want *bool) {
	rl.mu.Lock()
	var targets []*chatConn
	if s := rl.sessions[session]; s != nil {
		targets = make([]*chatConn, 0, len(s.conns))
		for c := range s.conns {
			if want == nil || c.chunks == *want {
				targets = append(targets, c)
			}
		}
	}
	rl.mu.Unlock()
	for _, c := range targets {
		c.send(b)
	}
}

// runChat relays one reply to the session: every token to the sockets
// that asked for chunks, the whole message at the end to the others.
func (rl *relay) runChat(session, text string) {
	chunks, whole := true, false
	var all strings.Builder
	err := rl.complete(rl.ctx, text, func(tok string) {
		all.WriteString(tok)
		rl.broadcast(session, chatFrameJSON("agent_message", tok), &chunks)
	})
	if err != nil {
		if rl.ctx.Err() == nil {
			rl.broadcast(session, chatFrameJSON("error", "The run failed: "+err.Error()), nil)
		}
		return
	}
	rl.broadcast(session, chatFrameJSON("agent_message", all.String()), &whole)
}

// ---- threads ----

// relayThread is a thread's live subscribers (GET …/events); a POST's own
// stream is not one of them.
type relayThread struct {
	active int // runs in flight
	seq    int64
	subs   map[*sseSub]struct{}
}

// sseSub is one subscriber; its handler goroutine writes what arrives.
type sseSub struct {
	out  chan []byte // encoded events; the last is done or error
	gone chan struct{}
	once sync.Once
}

func (s *sseSub) drop() { s.once.Do(func() { close(s.gone) }) }

func (s *sseSub) send(b []byte) {
	select {
	case s.out <- b:
	case <-s.gone:
	default:
		s.drop()
	}
}

func sseEvent(id int64, typ, data string) []byte {
	return []byte("id: " + strconv.FormatInt(id, 10) + "\nevent: " + typ + "\ndata: " + data + "\n\n")
}

func sseHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
}

// publish numbers an event of thread id and sends it to its subscribers;
// an ending event also ends their streams.
func (rl *relay) publish(id, typ, data string, ending bool) []byte {
	rl.mu.Lock()
	t := rl.threads[id]
	t.seq++
	b := sseEvent(t.seq, typ, data)
	subs := make([]*sseSub, 0, len(t.subs))
	for s := range t.subs {
		subs = append(subs, s)
	}
	if ending {
		clear(t.subs)
	}
	rl.mu.Unlock()
	for _, s := range subs {
		s.send(b)
	}
	return b
}

func (rl *relay) servePost(w http.ResponseWriter, r *http.Request) {
	id := strings.ToLower(r.PathValue("id"))
	var body struct {
		Text string `json:"text"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&body); err != nil || strings.TrimSpace(body.Text) == "" {
		http.Error(w, `{"error":"invalid request body"}`, http.StatusBadRequest)
		return
	}
	rl.mu.Lock()
	t := rl.threads[id]
	if t == nil {
		t = &relayThread{subs: map[*sseSub]struct{}{}}
		rl.threads[id] = t
	}
	t.active++
	rl.nextMsg++
	msgID := "msg_" + strconv.FormatInt(rl.nextMsg, 10)
	rl.mu.Unlock()

	rc := http.NewResponseController(w)
	sseHeaders(w)
	_ = rc.Flush()
	prefix := `{"thread_id":"` + id + `","message_id":"` + msgID + `","chunk":`
	writeOwn := true // false once this client has gone: the others still get the run
	write := func(b []byte) {
		if !writeOwn {
			return
		}
		_ = rc.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if _, err := w.Write(b); err != nil {
			writeOwn = false
			return
		}
		if rc.Flush() != nil {
			writeOwn = false
		}
	}
	err := rl.complete(rl.ctx, body.Text, func(tok string) {
		q, _ := json.Marshal(tok)
		write(rl.publish(id, "agent_text", prefix+string(q)+"}", false))
	})
	rl.mu.Lock()
	t.active--
	rl.mu.Unlock()
	if err != nil {
		q, _ := json.Marshal(err.Error())
		write(rl.publish(id, "error", `{"error":`+string(q)+`}`, true))
	} else {
		write(rl.publish(id, "done", `{}`, true))
	}
	_ = rc.SetWriteDeadline(time.Time{})
}

func (rl *relay) serveEvents(w http.ResponseWriter, r *http.Request) {
	id := strings.ToLower(r.PathValue("id"))
	sub := &sseSub{out: make(chan []byte, 1024), gone: make(chan struct{})}
	rl.mu.Lock()
	t := rl.threads[id]
	if t == nil {
		rl.mu.Unlock()
		http.Error(w, `{"error":"thread not found"}`, http.StatusNotFound)
		return
	}
	quiet := t.active == 0
	seq := t.seq
	if !quiet {
		t.subs[sub] = struct{}{}
	}
	rl.mu.Unlock()
	rc := http.NewResponseController(w)
	sseHeaders(w)
	if quiet {
		_, _ = w.Write(sseEvent(seq, "done", "{}"))
		_ = rc.Flush()
		return
	}
	defer func() {
		rl.mu.Lock()
		delete(t.subs, sub)
		rl.mu.Unlock()
		sub.drop()
		_ = rc.SetWriteDeadline(time.Time{})
	}()
	if rc.Flush() != nil {
		return
	}
	ctx := r.Context()
	for {
		select {
		case b := <-sub.out:
			_ = rc.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if _, err := w.Write(b); err != nil {
				return
			}
			if rc.Flush() != nil {
				return
			}
			if bytes.Contains(b, []byte("\nevent: done\n")) || bytes.Contains(b, []byte("\nevent: error\n")) {
				return
			}
		case <-sub.gone:
			return
		case <-ctx.Done():
			return
		}
	}
}
