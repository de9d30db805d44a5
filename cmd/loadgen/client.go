package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/agentwire/agentwire/internal/sse"
)

// receipt is one client's view of one stream: when each token arrived.
// The same client code reads agentwire and the relay.
type receipt struct {
	s      *stream
	sentAt time.Duration // when the client sent the request (0: not this client's request)

	mu     sync.Mutex
	at     []time.Duration // arrival of each token (0: not yet)
	got    int
	frames int // frames that brought at least one new token
	err    error
	done   chan struct{} // closed when every token arrived, or on failure
	ended  bool
}

func newReceipt(s *stream) *receipt {
	return &receipt{s: s, at: make([]time.Duration, s.n), done: make(chan struct{})}
}

// add records token i arriving at at; it reports whether it was new.
func (r *receipt) add(i int, at time.Duration) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if i < 0 || i >= len(r.at) || r.at[i] != 0 {
		return false
	}
	r.at[i] = at
	r.got++
	if r.got == len(r.at) && !r.ended {
		r.ended = true
		close(r.done)
	}
	return true
}

func (r *receipt) frame() {
	r.mu.Lock()
	r.frames++
	r.mu.Unlock()
}

// fail ends an incomplete receipt with err.
func (r *receipt) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended {
		return
	}
	r.ended = true
	r.err = err
	close(r.done)
}

// wait waits until the receipt is complete or failed, or for timeout.
func (r *receipt) wait(ctx context.Context, timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-r.done:
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		r.mu.Lock()
		defer r.mu.Unlock()
		return fmt.Errorf("stream %d: %d of %d tokens after %v", r.s.id, r.got, len(r.at), timeout)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return fmt.Errorf("stream %d: %d of %d tokens: %w", r.s.id, r.got, len(r.at), r.err)
	}
	return nil
}

// snapshot returns a copy of the arrival times, the count and the frames.
func (r *receipt) snapshot() (at []time.Duration, got, frames int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Duration(nil), r.at...), r.got, r.frames
}

// parseToken parses a word "s<stream>.<index>".
func parseToken(w string) (id int64, idx int, ok bool) {
	if len(w) < 4 || w[0] != 's' {
		return 0, 0, false
	}
	dot := strings.IndexByte(w, '.')
	if dot < 2 {
		return 0, 0, false
	}
	id, err := strconv.ParseInt(w[1:dot], 10, 64)
	if err != nil {
		return 0, 0, false
	}
	idx, err = strconv.Atoi(w[dot+1:])
	if err != nil {
		return 0, 0, false
	}
	return id, idx, true
}

// feedText records the tokens in one frame's text, which arrived at at,
// with the receipts find returns for their streams.
func feedText(text string, at time.Duration, find func(id int64) *receipt) {
	var touched []*receipt
	for _, w := range strings.Fields(text) {
		id, idx, ok := parseToken(w)
		if !ok {
			continue
		}
		r := find(id)
		if r == nil || !r.add(idx, at) {
			continue
		}
		seen := false
		for _, t := range touched {
			seen = seen || t == r
		}
		if !seen {
			touched = append(touched, r)
		}
	}
	for _, r := range touched {
		r.frame()
	}
}

// chatClient is one agentchat WebSocket. Its reader goroutine records the
// tokens of agent_message frames with the receipts registered by expect;
// an error frame or the end of the socket fails the incomplete ones.
type chatClient struct {
	ws     *websocket.Conn
	clk    clock
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	watch   map[int64]*receipt
	lastErr error
}

func dialChat(ctx context.Context, url string, hc *http.Client, clk clock) (*chatClient, error) {
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ws, resp, err := websocket.Dial(dctx, url, &websocket.DialOptions{HTTPClient: hc})
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("dial %s: %w (HTTP %d)", url, err, resp.StatusCode)
		}
		return nil, fmt.Errorf("dial %s: %w", url, err)
	}
	ws.SetReadLimit(64 << 20)
	rctx, rcancel := context.WithCancel(context.Background())
	c := &chatClient{ws: ws, clk: clk, cancel: rcancel, watch: map[int64]*receipt{}}
	c.wg.Go(func() { c.read(rctx) })
	return c, nil
}

// expect makes c record s's tokens and returns their receipt.
func (c *chatClient) expect(s *stream) *receipt {
	r := newReceipt(s)
	c.mu.Lock()
	c.watch[s.id] = r
	c.mu.Unlock()
	return r
}

func (c *chatClient) find(id int64) *receipt {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.watch[id]
}

// chat sends a chat frame on session; r, when not nil, is stamped with
// the sending time.
func (c *chatClient) chat(ctx context.Context, session, text string, r *receipt) error {
	b, err := json.Marshal(map[string]string{"type": "chat", "message": text, "session_id": session})
	if err != nil {
		return err
	}
	if r != nil {
		r.sentAt = c.clk.now()
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return c.ws.Write(wctx, websocket.MessageText, b)
}

type chatFrame struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

func (c *chatClient) read(ctx context.Context) {
	for {
		_, b, err := c.ws.Read(ctx)
		if err != nil {
			c.failAll(fmt.Errorf("socket: %w", err))
			return
		}
		at := c.clk.now()
		var f chatFrame
		if err := json.Unmarshal(b, &f); err != nil {
			continue
		}
		switch f.Type {
		case "agent_message":
			feedText(f.Message, at, c.find)
		case "error":
			c.failAll(fmt.Errorf("error frame: %s", f.Message))
		}
	}
}

func (c *chatClient) failAll(err error) {
	c.mu.Lock()
	c.lastErr = err
	rs := make([]*receipt, 0, len(c.watch))
	for _, r := range c.watch {
		rs = append(rs, r)
	}
	c.mu.Unlock()
	for _, r := range rs {
		r.fail(err)
	}
}

// close drops the socket and waits for the reader.
func (c *chatClient) close() {
	_ = c.ws.CloseNow()
	c.cancel()
	c.wg.Wait()
}

// threadsClient speaks the threads REST + SSE API.
type threadsClient struct {
	base string // http://host:port
	hc   *http.Client
	clk  clock
}

// post sends text to thread and reads its run's stream to its end,
// recording r's tokens. It returns the id of the stream's last event.
func (c *threadsClient) post(ctx context.Context, thread, text string, r *receipt) (string, error) {
	body, err := json.Marshal(map[string]string{"text": text})
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/api/v1/threads/"+thread, bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	r.sentAt = c.clk.now()
	resp, err := c.hc.Do(req)
	if err != nil {
		r.fail(err)
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		err := fmt.Errorf("POST thread: HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(b))
		r.fail(err)
		return "", err
	}
	return c.read(resp.Body, r)
}

// subscribe follows thread's events after lastID until the first done or
// error, recording r's tokens; ready is called once the server answered.
func (c *threadsClient) subscribe(ctx context.Context, thread, lastID string, r *receipt, ready func()) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/api/v1/threads/"+thread+"/events", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		r.fail(err)
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		err := fmt.Errorf("GET events: HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(b))
		r.fail(err)
		return err
	}
	ready()
	_, err = c.read(resp.Body, r)
	return err
}

// read reads a thread stream to its done or error event.
func (c *threadsClient) read(body io.Reader, r *receipt) (string, error) {
	find := func(id int64) *receipt {
		if id == r.s.id {
			return r
		}
		return nil
	}
	sr := sse.NewReader(body)
	for {
		e, err := sr.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("the stream ended without done")
			}
			r.fail(err)
			return sr.LastEventID(), err
		}
		switch e.Type {
		case "agent_text":
			at := c.clk.now()
			var d struct {
				Chunk string `json:"chunk"`
			}
			if json.Unmarshal([]byte(e.Data), &d) == nil {
				feedText(d.Chunk, at, find)
			}
		case "done":
			r.fail(errors.New("done before every token"))
			return sr.LastEventID(), nil
		case "error":
			err := fmt.Errorf("error event: %s", e.Data)
			r.fail(err)
			return sr.LastEventID(), err
		}
	}
}
