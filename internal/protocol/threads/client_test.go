package threads

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/generated/threadsapi"
	"github.com/agentwire/agentwire/internal/protocol/wiretest"
	"github.com/agentwire/agentwire/internal/sse"
	"github.com/agentwire/agentwire/internal/wire"
)

var threadID = uuid.MustParse("550e8400-e29b-41d4-a716-446655440000")

// exampleStream returns the document's example SSE stream as a server
// sends it. The document's code block ends with the done event's data line:
// a Markdown fence cannot show the blank line that ends the last event, so
// one is added (TestExampleStreamFile shows what happens without it).
func exampleStream(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/example-stream.sse")
	require.NoError(t, err)
	return append(b, '\n')
}

// wantExample is the example stream's events, decoded (it has no ids).
func wantExample() []threadsapi.StreamEvent {
	text := func(msg, chunk string) threadsapi.StreamEvent {
		return agentTextEvent("", threadsapi.AgentTextEvent{ThreadID: threadID, MessageID: msg, Chunk: chunk})
	}
	done := doneEvent(0)
	done.DoneSSE.ID = ""
	return []threadsapi.StreamEvent{
		text("msg_1", "I'll "),
		text("msg_1", "check "),
		text("msg_1", "the weather"),
		toolCallEvent("", threadsapi.ToolCallEvent{ToolCallID: "toolu_01234", ToolName: "get_weather",
			Arguments: threadsapi.JSONObject{"location": []byte(`"current"`)}}),
		toolResultEvent("", threadsapi.ToolResultEvent{ToolResultID: "result-toolu_01234", ToolCallID: "toolu_01234",
			Result: threadsapi.JSONObject{"temperature": []byte(`72`), "condition": []byte(`"sunny"`)}}),
		text("msg_2", "It's currently"),
		text("msg_2", " 72Â°F and sunny."), // the document's mojibake, kept
		done,
	}
}

// streamServer answers POST /api/v1/threads/{threadId} with body and
// records the requests it got.
type streamServer struct {
	*httptest.Server
	posts atomic.Int32
}

func newStreamServer(t *testing.T, body []byte) *streamServer {
	s := &streamServer{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/threads/{threadId}", func(w http.ResponseWriter, r *http.Request) {
		s.posts.Add(1)
		assert.Equal(t, threadID.String(), r.PathValue("threadId"))
		assert.Equal(t, "application/json", r.Header.Get("Content-Type"))
		b, err := io.ReadAll(r.Body)
		assert.NoError(t, err)
		req, err := DecodeSendMessageRequest(b)
		if !assert.NoError(t, err) {
			return
		}
		assert.Equal(t, "What is the weather today?", req.Text)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(body)
	})
	s.Server = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

func newClient(t *testing.T, url string) *Client {
	t.Helper()
	c, err := NewClient(url, nil)
	require.NoError(t, err)
	return c
}

func readStream(t *testing.T, s *Stream) []threadsapi.StreamEvent {
	t.Helper()
	var got []threadsapi.StreamEvent
	for {
		e, err := s.Next(t.Context())
		if errors.Is(err, io.EOF) {
			return got
		}
		require.NoError(t, err)
		got = append(got, e)
	}
}

func TestSendMessageDecodesExampleStream(t *testing.T) {
	srv := newStreamServer(t, exampleStream(t))
	s, err := newClient(t, srv.URL).SendMessage(t.Context(), threadID, "What is the weather today?")
	require.NoError(t, err)
	defer s.Close()
	require.Equal(t, wantExample(), readStream(t, s))
	_, err = s.Next(t.Context())
	require.ErrorIs(t, err, io.EOF, "the stream stays ended after done")
	require.EqualValues(t, 1, srv.posts.Load())
}

// TestGeneratedClientDecodesExampleStream checks the ogen client's own SSE
// decoding against the document's example stream: the generated types
// describe the stream the document shows, and the generated client decodes
// it to the same events as DecodeEvent.
func TestGeneratedClientDecodesExampleStream(t *testing.T) {
	srv := newStreamServer(t, exampleStream(t))
	api, err := threadsapi.NewClient(srv.URL, Bearer(""))
	require.NoError(t, err)
	res, err := api.SendMessage(t.Context(), &threadsapi.SendMessageRequest{Text: "What is the weather today?"},
		threadsapi.SendMessageParams{ThreadID: threadID})
	require.NoError(t, err)
	stream, ok := res.(*threadsapi.SendMessageOK)
	require.True(t, ok, "SendMessage = %T, want *SendMessageOK", res)
	defer stream.Close()

	var got []threadsapi.StreamEvent
	for range wantExample() { // never read past done: the generated stream would post again
		ev, err := stream.Next(t.Context())
		require.NoError(t, err)
		got = append(got, ev)
	}
	require.Equal(t, wantExample(), got)
	require.EqualValues(t, 1, srv.posts.Load())
}

// TestGeneratedClientResumes checks the generated events operation sends
// Last-Event-ID and decodes ids.
func TestGeneratedClientResumes(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/threads/{threadId}/events", func(w http.ResponseWriter, r *http.Request) {
		assert.Equal(t, "41", r.Header.Get("Last-Event-ID"))
		w.Header().Set("Content-Type", "text/event-stream")
		_ = sse.NewWriter(w).Event(sse.Event{ID: "42", Type: EventDone, Data: "{}"})
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	api, err := threadsapi.NewClient(srv.URL, Bearer(""))
	require.NoError(t, err)
	res, err := api.StreamEvents(t.Context(), threadsapi.StreamEventsParams{ThreadID: threadID, LastEventID: threadsapi.NewOptString("41")})
	require.NoError(t, err)
	stream, ok := res.(*threadsapi.StreamEventsOK)
	require.True(t, ok, "StreamEvents = %T", res)
	defer stream.Close()
	ev, err := stream.Next(t.Context())
	require.NoError(t, err)
	require.Equal(t, doneEvent(42), ev)
}

// TestExampleStreamFile keeps the document's stream byte for byte: read as
// it stands, its last event (done) is not dispatched, because no blank line
// ends it.
func TestExampleStreamFile(t *testing.T) {
	f, err := os.Open("testdata/example-stream.sse")
	require.NoError(t, err)
	defer f.Close()
	r := sse.NewReader(f)
	var got []threadsapi.StreamEvent
	for {
		raw, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		e, err := DecodeEvent(raw)
		require.NoError(t, err)
		got = append(got, e)
	}
	want := wantExample()
	require.Equal(t, want[:len(want)-1], got)
}

func TestStreamIDsHeartbeatsAndUnknownEvents(t *testing.T) {
	var b strings.Builder
	w := sse.NewWriter(&b)
	require.NoError(t, w.Comment("ping"))
	require.NoError(t, w.Event(sse.Event{ID: "1", Type: EventAgentText, Data: `{"thread_id":"550e8400-e29b-41d4-a716-446655440000","message_id":"m","chunk":"a"}`}))
	require.NoError(t, w.Event(sse.Event{ID: "2", Type: "thinking", Data: `{"text":"hmm"}`}))
	require.NoError(t, w.Comment("ping"))
	require.NoError(t, w.Event(sse.Event{ID: "3", Type: EventError, Data: `{"error":"model unavailable"}`}))
	require.NoError(t, w.Event(sse.Event{ID: "4", Type: EventDone, Data: `{}`}))

	srv := newStreamServer(t, []byte(b.String()))
	s, err := newClient(t, srv.URL).SendMessage(t.Context(), threadID, "What is the weather today?")
	require.NoError(t, err)
	defer s.Close()
	want := []threadsapi.StreamEvent{
		agentTextEvent("1", threadsapi.AgentTextEvent{ThreadID: threadID, MessageID: "m", Chunk: "a"}),
		errorEvent(3, "model unavailable"),
	}
	require.Equal(t, want, readStream(t, s), "the POST stream ends at its error event")
	require.Equal(t, "3", s.LastEventID())
}

func TestStreamReportsBadEventAndReadsOn(t *testing.T) {
	srv := newStreamServer(t, []byte("id: 1\nevent: agent_text\ndata: {\"thread_id\":\"550e8400-e29b-41d4-a716-446655440000\",\"message_id\":\"m\",\"chunk\":1}\n\nid: 2\nevent: done\ndata: {}\n\n"))
	s, err := newClient(t, srv.URL).SendMessage(t.Context(), threadID, "What is the weather today?")
	require.NoError(t, err)
	defer s.Close()
	_, err = s.Next(t.Context())
	we, ok := wire.AsError(err)
	require.True(t, ok, "Next() = %v, want a *wire.Error", err)
	require.Equal(t, wire.Error{Kind: wire.KindType, Message: EventAgentText, Path: "/chunk", Reason: "must be string"}, *we)
	e, err := s.Next(t.Context())
	require.NoError(t, err)
	require.Equal(t, doneEvent(2), e)
}

func TestInterruptedStreamResumes(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/threads/{threadId}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		sw := sse.NewWriter(w)
		_ = sw.Event(sse.Event{ID: "1", Type: EventToolCall, Data: `{"tool_call_id":"t1","tool_name":"get_weather","arguments":{}}`})
		_ = sw.Event(sse.Event{ID: "2", Type: EventToolResult, Data: `{"tool_result_id":"result-t1","tool_call_id":"t1","result":{"temperature":72}}`})
		// The connection ends here, before done.
	})
	var resumes atomic.Int32
	mux.HandleFunc("GET /api/v1/threads/{threadId}/events", func(w http.ResponseWriter, r *http.Request) {
		resumes.Add(1)
		assert.Equal(t, "2", r.Header.Get("Last-Event-ID"))
		assert.Equal(t, "text/event-stream", r.Header.Get("Accept"))
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		sw := sse.NewWriter(w)
		_ = sw.Event(sse.Event{ID: "3", Type: EventDone, Data: `{}`})
		_ = sw.Event(sse.Event{ID: "5", Type: EventAgentText, Data: `{"thread_id":"550e8400-e29b-41d4-a716-446655440000","message_id":"m2","chunk":"next run"}`})
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := newClient(t, srv.URL)

	s, err := c.SendMessage(t.Context(), threadID, "What is the weather today?")
	require.NoError(t, err)
	defer s.Close()
	for range 2 {
		_, err := s.Next(t.Context())
		require.NoError(t, err)
	}
	_, err = s.Next(t.Context())
	require.ErrorIs(t, err, ErrIncomplete)

	r, err := c.Resume(t.Context(), threadID, s.LastEventID())
	require.NoError(t, err)
	defer r.Close()
	got := readStream(t, r)
	require.Len(t, got, 2, "a resumed stream reads on past done")
	require.Equal(t, threadsapi.DoneSSEStreamEvent, got[0].Type)
	require.Equal(t, "next run", got[1].AgentTextSSE.Data.Chunk)
	require.Equal(t, "5", r.LastEventID())
	require.EqualValues(t, 1, resumes.Load())
}

func TestResumeFromTheStartSendsNoLastEventID(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/threads/{threadId}/events", func(w http.ResponseWriter, r *http.Request) {
		_, sent := r.Header["Last-Event-Id"]
		assert.False(t, sent)
		w.Header().Set("Content-Type", "text/event-stream")
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	s, err := newClient(t, srv.URL).Resume(t.Context(), threadID, "")
	require.NoError(t, err)
	defer s.Close()
	require.Empty(t, readStream(t, s))
}

func TestNextHonoursContext(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/threads/{threadId}/events", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_ = sse.NewWriter(w).Event(sse.Event{ID: "1", Type: EventDone, Data: `{}`})
		_ = http.NewResponseController(w).Flush()
		<-r.Context().Done() // a live stream with nothing more to say
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	s, err := newClient(t, srv.URL).Resume(t.Context(), threadID, "")
	require.NoError(t, err)
	defer s.Close()
	_, err = s.Next(t.Context())
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := s.Next(ctx)
		done <- err
	}()
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
}

func TestErrorAnswers(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/threads/{threadId}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":"invalid request body: /text: must be at least 1 characters"}`)
	})
	mux.HandleFunc("GET /api/v1/threads/{threadId}/events", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "boom", http.StatusInternalServerError)
	})
	mux.HandleFunc("GET /api/v1/threads/{threadId}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"error":"thread not found"}`)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := newClient(t, srv.URL)

	_, err := c.SendMessage(t.Context(), threadID, "hi")
	var ae *APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, APIError{StatusCode: 400, Message: "invalid request body: /text: must be at least 1 characters"}, *ae)

	_, err = c.Resume(t.Context(), threadID, "")
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusInternalServerError, ae.StatusCode)
	require.Contains(t, ae.Message, "undocumented error body")

	_, err = c.History(t.Context(), threadID)
	require.ErrorAs(t, err, &ae)
	require.Equal(t, APIError{StatusCode: 404, Message: "thread not found"}, *ae)
}

func TestStreamNeedsEventStream(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{}`)
	}))
	defer srv.Close()
	_, err := newClient(t, srv.URL).Resume(t.Context(), threadID, "")
	require.ErrorContains(t, err, "want text/event-stream")
}

func TestSendMessageValidatesBeforeSending(t *testing.T) {
	srv := newStreamServer(t, nil)
	_, err := newClient(t, srv.URL).SendMessage(t.Context(), threadID, "")
	we, ok := wire.AsError(err)
	require.True(t, ok, "SendMessage(\"\") = %v, want a *wire.Error", err)
	require.Equal(t, "/text", we.Path)
	require.EqualValues(t, 0, srv.posts.Load())
}

func TestHistory(t *testing.T) {
	var body []byte
	for _, ex := range wiretest.Load[example](t, "testdata/examples.json") {
		if ex.Message == "ThreadResponse" {
			body = ex.JSON
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/threads/{threadId}", func(w http.ResponseWriter, r *http.Request) {
		assert.Equal(t, threadID.String(), r.PathValue("threadId"))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	h, err := newClient(t, srv.URL+"/").History(t.Context(), threadID)
	require.NoError(t, err)
	require.Equal(t, threadID, h.ThreadID)
	require.Len(t, h.Messages, 3)
	require.Equal(t, threadsapi.MessageMessageTypeToolResult, h.Messages[2].MessageType)
	tr, ok := h.Messages[2].Content.GetToolResultContent()
	require.True(t, ok)
	require.Equal(t, "result-toolu_01234", tr.ToolResultID)
	require.JSONEq(t, `72`, string(tr.Result["temperature"]))
	require.Equal(t, "2024-01-15T10:30:01Z", h.Messages[1].Timestamp.UTC().Format("2006-01-02T15:04:05Z07:00"))
}

func TestNewClientRejectsBadBaseURL(t *testing.T) {
	for _, u := range []string{"localhost:3030", "ftp://x", "http://%zz"} {
		_, err := NewClient(u, nil)
		require.Error(t, err, "NewClient(%q)", u)
	}
}
