package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// clock is the one time base of the loadgen process: the upstream stamps
// each token when it sends it and the clients when they receive it, on the
// same monotonic clock.
type clock struct{ base time.Time }

func newClock() clock { return clock{base: time.Now()} }

// now is the time since the base; never 0 in practice, so 0 can mean "not
// yet".
func (c clock) now() time.Duration { return time.Since(c.base) }

// stream is one model reply the fake upstream streams: n tokens, one every
// interval. Its tokens are the words "s<id>.<index> ", so that a client
// knows which token of which stream each received word is.
type stream struct {
	id       int64
	n        int
	interval time.Duration
	gate     chan struct{} // when not nil, the first token waits until it is closed
	opened   sync.Once

	arrived   chan struct{}  // closed when the upstream gets the request
	arrivedAt atomic.Int64   // clock time of the request, ns
	sent      []atomic.Int64 // clock time each token was written, ns (0: not yet)
	served    atomic.Bool
}

// token is the text of token i of s.
func (s *stream) token(i int) string {
	return "s" + strconv.FormatInt(s.id, 10) + "." + strconv.Itoa(i) + " "
}

// prompt is the user message that asks the upstream for s.
func (s *stream) prompt() string { return "loadgen stream " + strconv.FormatInt(s.id, 10) }

// open lets a gated stream start; it may be called more than once.
func (s *stream) open() {
	if s.gate != nil {
		s.opened.Do(func() { close(s.gate) })
	}
}

// sentAt is when token i was sent, or 0.
func (s *stream) sentAt(i int) time.Duration { return time.Duration(s.sent[i].Load()) }

// upstream is a fake OpenAI-compatible server: POST /v1/chat/completions
// answers in the Chat Completions streaming format (`data: {chunk}` events
// and `data: [DONE]`) with the stream its request's last user message
// names, paced at the stream's rate. Both agentwire and the relay call it.
type upstream struct {
	clock clock
	ln    net.Listener
	srv   *http.Server
	ctx   context.Context // cancelled by close: streams stop
	stop  context.CancelFunc
	wg    sync.WaitGroup // the serve goroutine and every handler

	mu      sync.Mutex
	streams map[int64]*stream
	nextID  int64

	unknown   atomic.Int64 // requests that named no stream
	duplicate atomic.Int64 // requests for a stream already served
}

func startUpstream(c clock) (*upstream, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(context.Background())
	u := &upstream{clock: c, ln: ln, ctx: ctx, stop: stop, streams: map[int64]*stream{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", u.serveCompletion)
	// The server's start-up check of its model lists the models.
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"loadgen","object":"model","created":0,"owned_by":"loadgen"}]}`)
	})
	u.srv = &http.Server{Handler: u.track(mux), ReadHeaderTimeout: 10 * time.Second}
	u.wg.Go(func() { _ = u.srv.Serve(ln) })
	return u, nil
}

// track counts handlers in u.wg, so that close waits for them.
func (u *upstream) track(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.wg.Add(1)
		defer u.wg.Done()
		h.ServeHTTP(w, r)
	})
}

// baseURL is what OPENAI_BASE_URL names.
func (u *upstream) baseURL() string { return "http://" + u.ln.Addr().String() + "/v1" }

// close stops every stream and waits for the handlers.
func (u *upstream) close() {
	u.stop()
	_ = u.srv.Close()
	u.wg.Wait()
}

// newStream registers a stream of n tokens at rate tokens a second (0:
// as fast as possible); gated streams wait for open.
func (u *upstream) newStream(n int, rate float64, gated bool) *stream {
	s := &stream{n: n, arrived: make(chan struct{}), sent: make([]atomic.Int64, n)}
	if rate > 0 {
		s.interval = time.Duration(float64(time.Second) / rate)
	}
	if gated {
		s.gate = make(chan struct{})
	}
	u.mu.Lock()
	u.nextID++
	s.id = u.nextID
	u.streams[s.id] = s
	u.mu.Unlock()
	return s
}

// forget drops streams whose measurements have been taken.
func (u *upstream) forget(ss ...*stream) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, s := range ss {
		delete(u.streams, s.id)
	}
}

var promptRE = regexp.MustCompile(`loadgen stream (\d+)`)

// completionRequest is the part of a Chat Completions request read here.
type completionRequest struct {
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

// lastUserText is the text of the request's last user message; content is
// a string or an array of text parts.
func (r *completionRequest) lastUserText() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		m := r.Messages[i]
		if m.Role != "user" {
			continue
		}
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			return s
		}
		var parts []struct {
			Text string `json:"text"`
		}
		if json.Unmarshal(m.Content, &parts) == nil {
			var all string
			for _, p := range parts {
				all += p.Text
			}
			return all
		}
		return ""
	}
	return ""
}

func (u *upstream) lookup(text string) *stream {
	m := promptRE.FindStringSubmatch(text)
	if m == nil {
		return nil
	}
	id, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return nil
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.streams[id]
}

func (u *upstream) serveCompletion(w http.ResponseWriter, r *http.Request) {
	at := u.clock.now()
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req completionRequest
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, `{"error":{"message":"bad JSON"}}`, http.StatusBadRequest)
		return
	}
	s := u.lookup(req.lastUserText())
	cw := newChunkWriter(w)
	switch {
	case s == nil:
		u.unknown.Add(1)
		_ = cw.reply(u.ctx, r.Context(), []string{"unknown stream"})
		return
	case s.served.Swap(true):
		u.duplicate.Add(1)
		_ = cw.reply(u.ctx, r.Context(), []string{"again"})
		return
	}
	s.arrivedAt.Store(int64(at))
	close(s.arrived)
	if s.gate != nil {
		select {
		case <-s.gate:
		case <-r.Context().Done():
			return
		case <-u.ctx.Done():
			return
		}
	}
	_ = cw.stream(u.ctx, r.Context(), s, u.clock)
}

// chunkWriter writes Chat Completions chunks.
type chunkWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	created string
}

func newChunkWriter(w http.ResponseWriter) *chunkWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return &chunkWriter{w: w, rc: http.NewResponseController(w), created: strconv.FormatInt(time.Now().Unix(), 10)}
}

// data writes one `data:` event and flushes it.
func (c *chunkWriter) data(payload string) error {
	if _, err := io.WriteString(c.w, "data: "+payload+"\n\n"); err != nil {
		return err
	}
	return c.rc.Flush()
}

func (c *chunkWriter) chunk(delta, finish string) error {
	return c.data(`{"id":"chatcmpl-loadgen","object":"chat.completion.chunk","created":` + c.created +
		`,"model":"loadgen","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + finish + `}]}`)
}

func (c *chunkWriter) content(text string) error {
	b, _ := json.Marshal(text)
	return c.chunk(`{"content":`+string(b)+`}`, "null")
}

// end writes the finish chunk, the usage chunk and [DONE].
func (c *chunkWriter) end(tokens int) error {
	if err := c.chunk(`{}`, `"stop"`); err != nil {
		return err
	}
	usage := fmt.Sprintf(`{"id":"chatcmpl-loadgen","object":"chat.completion.chunk","created":%s,"model":"loadgen","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":%d,"total_tokens":%d}}`,
		c.created, tokens, tokens+10)
	if err := c.data(usage); err != nil {
		return err
	}
	return c.data("[DONE]")
}

// reply streams texts at once.
func (c *chunkWriter) reply(stop, req context.Context, texts []string) error {
	if err := c.chunk(`{"role":"assistant","content":""}`, "null"); err != nil {
		return err
	}
	for _, t := range texts {
		if stop.Err() != nil || req.Err() != nil {
			return errors.New("stopped")
		}
		if err := c.content(t); err != nil {
			return err
		}
	}
	return c.end(len(texts))
}

// stream streams s's tokens on their schedule: token i at i intervals
// after the first, stamping each as it is written.
func (c *chunkWriter) stream(stop, req context.Context, s *stream, clk clock) error {
	if err := c.chunk(`{"role":"assistant","content":""}`, "null"); err != nil {
		return err
	}
	start := time.Now()
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for i := range s.n {
		if wait := time.Until(start.Add(time.Duration(i) * s.interval)); wait > 0 {
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			select {
			case <-timer.C:
			case <-stop.Done():
				return stop.Err()
			case <-req.Done():
				return req.Err()
			}
		}
		s.sent[i].Store(int64(clk.now()))
		if err := c.content(s.token(i)); err != nil {
			return err
		}
	}
	return c.end(s.n)
}
