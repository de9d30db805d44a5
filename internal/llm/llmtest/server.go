// Package llmtest holds what the provider tests share: a fake model API that
// speaks Server-Sent Events from a script and records the requests it got,
// and checks of the llm.Model stream contract.
package llmtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// Reply is how the fake API answers one request.
type Reply struct {
	// Status is the HTTP status; zero means 200.
	Status int
	// ContentType defaults to text/event-stream when Events are set and to
	// application/json otherwise.
	ContentType string
	// Header is added to the response headers.
	Header http.Header
	// Body is written as a whole (error replies).
	Body string
	// Events are SSE frames (see Event and Data), written and flushed one by
	// one after Body.
	Events []string
	// Hang holds the response open after Events until the client goes away,
	// as a model that is still thinking would.
	Hang bool
}

// Request is what the fake API received.
type Request struct {
	Method string
	Path   string
	Query  url.Values
	Header http.Header
	Body   []byte
}

// JSON decodes the request body into a generic value for assertions.
func (r Request) JSON(t testing.TB) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(r.Body, &v); err != nil {
		t.Fatalf("request body is not a JSON object: %v\n%s", err, r.Body)
	}
	return v
}

// Server is a fake model API on a real listener. Each request gets the next
// scripted Reply; a request beyond the script gets a 500.
type Server struct {
	// URL is the server's base URL, without a trailing slash.
	URL string

	srv      *httptest.Server
	mu       sync.Mutex
	replies  []Reply
	answer   func(Request) Reply
	requests []Request
	goneOnce sync.Once
	gone     chan struct{}
}

// NewServer starts a fake API answering with replies in turn; it is closed
// when the test ends.
func NewServer(t testing.TB, replies ...Reply) *Server {
	s := &Server{replies: replies, gone: make(chan struct{})}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	t.Cleanup(s.srv.Close)
	return s
}

// NewServerFunc starts a fake API answering every request with answer's
// reply to it, for as many requests as come; it is closed when the test
// ends. answer runs on the server's goroutines, one per request.
func NewServerFunc(t testing.TB, answer func(Request) Reply) *Server {
	s := &Server{answer: answer, gone: make(chan struct{})}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	t.Cleanup(s.srv.Close)
	return s
}

// Client returns an HTTP client for the server.
func (s *Server) Client() *http.Client { return s.srv.Client() }

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Gone is closed once the client of a Hang reply has gone away: the request
// was torn down.
func (s *Server) Gone() <-chan struct{} { return s.gone }

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req := Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(), Header: r.Header.Clone(), Body: body}
	s.mu.Lock()
	s.requests = append(s.requests, req)
	n := len(s.requests)
	var rep Reply
	ok := n <= len(s.replies)
	if ok {
		rep = s.replies[n-1]
	}
	s.mu.Unlock()
	if s.answer != nil {
		rep, ok = s.answer(req), true
	}
	if !ok {
		http.Error(w, fmt.Sprintf("llmtest: unexpected request %d to %s", n, r.URL.Path), http.StatusInternalServerError)
		return
	}

	ct := rep.ContentType
	if ct == "" {
		ct = "application/json"
		if len(rep.Events) > 0 || rep.Hang {
			ct = "text/event-stream"
		}
	}
	for k, v := range rep.Header {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Type", ct)
	status := rep.Status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	rc := http.NewResponseController(w)
	if rep.Body != "" {
		_, _ = io.WriteString(w, rep.Body)
	}
	for _, ev := range rep.Events {
		if _, err := io.WriteString(w, ev); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
	_ = rc.Flush()
	if rep.Hang {
		<-r.Context().Done()
		s.goneOnce.Do(func() { close(s.gone) })
	}
}

// Event formats one SSE frame with an event name. data is written as is if
// it is a string, else as JSON.
func Event(name string, data any) string {
	return "event: " + name + "\n" + Data(data)
}

// Data formats one SSE frame with only a data field. data is written as is
// if it is a string, else as JSON.
func Data(data any) string {
	var s string
	switch d := data.(type) {
	case string:
		s = d
	default:
		b, err := json.Marshal(d)
		if err != nil {
			panic(fmt.Sprintf("llmtest.Data: %v", err))
		}
		s = string(b)
	}
	var b strings.Builder
	for line := range strings.SplitSeq(s, "\n") {
		b.WriteString("data: " + line + "\n")
	}
	b.WriteString("\n")
	return b.String()
}
