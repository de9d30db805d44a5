package threads

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/generated/threadsapi"
	"github.com/agentwire/agentwire/internal/bus/local"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/protocol"
	"github.com/agentwire/agentwire/internal/runs"
	"github.com/agentwire/agentwire/internal/store/memory"
	"github.com/agentwire/agentwire/internal/thread"
)

// fakeCore is a protocol.Core over a real thread service (a memory store
// and the local bus) whose failures and runs a test sets, for the paths a
// real server seldom takes: store failures, a feed that breaks, a run
// that never ends. server_test.go covers the rest against the real core.
type fakeCore struct {
	svc *thread.Service
	bus *local.Bus

	mu     sync.Mutex
	active string
	errs   map[string]error // by method name
	queue  bool             // Post queues: it commits nothing
	runs   int
}

var _ protocol.Core = (*fakeCore)(nil)

func newFakeCore(t *testing.T) *fakeCore {
	log, b := memory.New(), local.New()
	c := &fakeCore{svc: thread.New(log, b, nil, thread.Options{}), bus: b, errs: map[string]error{}}
	t.Cleanup(func() {
		_ = c.svc.Close()
		_ = b.Close()
		_ = log.Close()
	})
	return c
}

// add commits events of run to the thread and publishes them.
func (c *fakeCore) add(thread, run string, ps ...event.Payload) {
	evs := make([]event.Event, len(ps))
	for i, p := range ps {
		evs[i] = event.New(thread, run, p)
	}
	if _, err := c.svc.Append(context.Background(), thread, evs...); err != nil {
		panic(err)
	}
}

func (c *fakeCore) fail(method string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.errs[method]
}

func (c *fakeCore) LastSeq(ctx context.Context, t string) (int64, error) {
	if err := c.fail("LastSeq"); err != nil {
		return 0, err
	}
	return c.svc.LastSeq(ctx, t)
}

func (c *fakeCore) Read(ctx context.Context, t string, after int64, limit int) ([]event.Event, error) {
	return c.svc.Read(ctx, t, after, limit)
}

func (c *fakeCore) History(ctx context.Context, t string) ([]event.Event, error) {
	if err := c.fail("History"); err != nil {
		return nil, err
	}
	return c.svc.History(ctx, t)
}

func (c *fakeCore) Pull(ctx context.Context, t string, after int64, notify func()) (*thread.Pull, error) {
	if err := c.fail("Pull"); err != nil {
		return nil, err
	}
	p, err := c.svc.Pull(ctx, t, after, thread.PullOptions{Notify: notify})
	if errors.Is(err, thread.ErrAfterEnd) {
		return nil, protocol.Wrap(protocol.CodeInvalid, err, "past the thread's last event")
	}
	return p, err
}

func (c *fakeCore) Post(ctx context.Context, t string, in runs.Input) (runs.Posted, error) {
	if err := c.fail("Post"); err != nil {
		return runs.Posted{}, err
	}
	c.mu.Lock()
	c.runs++
	p := runs.Posted{Run: fmt.Sprintf("run-%d", c.runs), MessageID: event.NewID(), Queued: c.queue}
	c.mu.Unlock()
	if !p.Queued {
		c.add(t, p.Run, event.MessageUser{MessageID: p.MessageID, Text: in.Text})
	}
	return p, nil
}

func (c *fakeCore) Own(context.Context, string) error                    { return nil }
func (c *fakeCore) Resolve(context.Context, string, event.Command) error { return nil }
func (c *fakeCore) Cancel(context.Context, string) error                 { return nil }

func (c *fakeCore) Record(ctx context.Context, t string, p event.Payload) (event.Event, error) {
	evs, err := c.svc.Append(ctx, t, event.New(t, "", p))
	if err != nil {
		return event.Event{}, err
	}
	return evs[0], nil
}

func (c *fakeCore) Active(ctx context.Context, t string) (string, error) {
	if err := c.fail("Active"); err != nil {
		return "", err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.active, nil
}

// logBuffer collects a handler's log.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// fakeServer serves a Handler over core on a real listener.
func fakeServer(t *testing.T, core *fakeCore) (*Handler, *Client, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	h := New(core, Options{Heartbeat: 10 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, h.Shutdown(ctx))
		srv.Close()
	})
	return h, newClient(t, srv.URL), logs
}

// TestStoreFailures: a core that fails answers 500 with a body that hides
// the cause, which goes to the log; a core that is stopping answers 503.
// (Streams read no LastSeq of their own: Subscribe tells them where the
// thread ends.)
func TestStoreFailures(t *testing.T) {
	cause := errors.New("disk on fire")
	tests := []struct {
		name   string
		method string // the failing Core method
		err    error
		call   func(c *Client, id uuid.UUID) error
		status int
		seed   event.Payload // the thread's one event; default a user message
	}{
		{"history", "History", cause, history, 500, nil},
		// No conversation events: GET asks LastSeq whether the thread exists.
		{"history of a thread without messages", "LastSeq", cause, history, 500, event.MessageDelta{MessageID: "a", Text: "x"}},
		{"post: subscribe", "Pull", cause, send, 500, nil},
		{"post: post", "Post", cause, send, 500, nil},
		{"post: shutting down", "Post", protocol.Wrap(protocol.CodeUnavailable, runs.ErrShuttingDown, "the server is shutting down"), send, 503, nil},
		{"events: subscribe", "Pull", cause, resume, 500, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			core := newFakeCore(t)
			id := uuid.New()
			if tt.seed == nil {
				tt.seed = event.MessageUser{MessageID: "m0", Text: "hi"}
			}
			core.add(id.String(), "r0", tt.seed)
			core.errs[tt.method] = tt.err
			_, c, logs := fakeServer(t, core)
			err := tt.call(c, id)
			var apiErr *APIError
			require.ErrorAs(t, err, &apiErr)
			assert.Equal(t, tt.status, apiErr.StatusCode)
			assert.NotContains(t, apiErr.Message, "disk")
			if tt.status == 500 {
				assert.Equal(t, "internal server error", apiErr.Message)
				assert.Contains(t, logs.String(), "disk on fire")
			}
		})
	}
}

func history(c *Client, id uuid.UUID) error {
	_, err := c.History(context.Background(), id)
	return err
}

func send(c *Client, id uuid.UUID) error {
	s, err := c.SendMessage(context.Background(), id, "hello")
	if err == nil {
		s.Close()
	}
	return err
}

func resume(c *Client, id uuid.UUID) error {
	s, err := c.Resume(context.Background(), id, "")
	if err == nil {
		s.Close()
	}
	return err
}

// TestFeedFailureSendsError: a follow that breaks (its bus closes) ends
// the stream with an error event whose id is the last event sent, to
// resume from.
func TestFeedFailureSendsError(t *testing.T) {
	core := newFakeCore(t)
	id := uuid.New()
	core.add(id.String(), "r1", event.MessageUser{MessageID: "u1", Text: "hi"}, event.MessageDelta{MessageID: "a1", Text: "Hel"})
	core.active = "r1"
	_, c, logs := fakeServer(t, core)

	s, err := c.Resume(t.Context(), id, "")
	require.NoError(t, err)
	defer s.Close()
	first, err := s.Next(t.Context())
	require.NoError(t, err)
	assert.Equal(t, agentTextEvent("2", threadsapi.AgentTextEvent{ThreadID: id, MessageID: "a1", Chunk: "Hel"}), first)
	require.NoError(t, core.bus.Close())
	got := readStream(t, s)
	require.Len(t, got, 1)
	assert.Equal(t, "2", EventID(got[0]))
	assert.Equal(t, threadsapi.ErrorSSEStreamEvent, got[0].Type)
	assert.Contains(t, got[0].ErrorSSE.Data.Error, "resume")
	assert.Contains(t, logs.String(), "bus: closed")
}

// TestQuietThread: a stream that has delivered everything while no run is
// active ends, since nothing more will come: the resume stream with done
// (a run a crash interrupted has no end of its own), the POST stream with
// an error saying what became of its run.
func TestQuietThread(t *testing.T) {
	t.Run("resume after an interrupted run", func(t *testing.T) {
		core := newFakeCore(t)
		id := uuid.New()
		core.add(id.String(), "r1",
			event.MessageUser{MessageID: "u1", Text: "hi"},
			event.MessageStarted{MessageID: "a1", Role: event.RoleAssistant},
			event.MessageDelta{MessageID: "a1", Text: "half"})
		_, c, _ := fakeServer(t, core)
		s, err := c.Resume(t.Context(), id, "")
		require.NoError(t, err)
		defer s.Close()
		got := readStream(t, s)
		require.Len(t, got, 2)
		assert.Equal(t, "half", got[0].AgentTextSSE.Data.Chunk)
		assert.Equal(t, doneEvent(3), got[1])
	})
	t.Run("post: a run without an end", func(t *testing.T) {
		core := newFakeCore(t)
		_, c, _ := fakeServer(t, core)
		s, err := c.SendMessage(t.Context(), uuid.New(), "hello")
		require.NoError(t, err)
		defer s.Close()
		got := readStream(t, s)
		require.Len(t, got, 1)
		assert.Equal(t, "1", EventID(got[0]))
		assert.Contains(t, got[0].ErrorSSE.Data.Error, "without an end")
	})
	t.Run("post: a queued message that was dropped", func(t *testing.T) {
		core := newFakeCore(t)
		id := uuid.New()
		core.add(id.String(), "r0", event.MessageUser{MessageID: "u0", Text: "first"}, event.RunCancelled{})
		core.queue = true
		_, c, _ := fakeServer(t, core)
		s, err := c.SendMessage(t.Context(), id, "second")
		require.NoError(t, err)
		defer s.Close()
		got := readStream(t, s)
		require.Len(t, got, 1)
		assert.Equal(t, "2", EventID(got[0]))
		assert.Contains(t, got[0].ErrorSSE.Data.Error, "dropped")
	})
}

// TestShutdownDrainsStreams: at shutdown a stream sends what the log holds
// and closes without done, so its client resumes; new streams get 503.
func TestShutdownDrainsStreams(t *testing.T) {
	core := newFakeCore(t)
	id := uuid.New()
	core.add(id.String(), "r1", event.MessageUser{MessageID: "u1", Text: "hi"}, event.MessageDelta{MessageID: "a1", Text: "a"})
	core.active = "r1"
	h, c, _ := fakeServer(t, core)

	s, err := c.Resume(t.Context(), id, "")
	require.NoError(t, err)
	defer s.Close()
	e, err := s.Next(t.Context())
	require.NoError(t, err)
	require.Equal(t, "a", e.AgentTextSSE.Data.Chunk)

	core.add(id.String(), "r1", event.MessageDelta{MessageID: "a1", Text: "b"})
	require.NoError(t, h.Shutdown(t.Context()))
	rest := readStream(t, s)
	require.Len(t, rest, 1, "the stream delivers what was committed before it closes")
	assert.Equal(t, agentTextEvent("3", threadsapi.AgentTextEvent{ThreadID: id, MessageID: "a1", Chunk: "b"}), rest[0])

	_, err = c.Resume(t.Context(), id, "3")
	var apiErr *APIError
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusServiceUnavailable, apiErr.StatusCode)

	// The document's 503, as the generated client reads it.
	api, err := threadsapi.NewClient(c.base.String(), Bearer(""))
	require.NoError(t, err)
	res, err := api.SendMessage(t.Context(), &threadsapi.SendMessageRequest{Text: "hi"}, threadsapi.SendMessageParams{ThreadID: id})
	require.NoError(t, err)
	unavailable, ok := res.(*threadsapi.ShuttingDownHeaders)
	require.True(t, ok, "SendMessage = %T, want *ShuttingDownHeaders", res)
	assert.Equal(t, threadsapi.NewOptInt(1), unavailable.RetryAfter)
	assert.Contains(t, unavailable.Response.Error, "shutting down")
}

// TestProject covers the mapping of canonical events that the scripted
// runs in server_test.go do not produce.
func TestProject(t *testing.T) {
	id := uuid.New()
	p := newProjector(id)
	ev := func(seq int64, pl event.Payload) event.Event {
		return event.Event{Thread: id.String(), Seq: seq, ID: fmt.Sprint("e", seq), Time: time.Now(), Payload: pl}
	}
	type out struct {
		e       threadsapi.StreamEvent
		ok, end bool
	}
	project := func(e event.Event) out {
		o, ok, end := p.project(e)
		return out{o, ok, end}
	}
	none := out{}

	// An explanation of a pending call is shown to people where it was
	// asked for, not as this protocol's agent text.
	assert.Equal(t, none, project(ev(1, event.MessageStarted{MessageID: "x", Role: event.RoleAssistant, Purpose: event.PurposeExplanation})))
	assert.Equal(t, none, project(ev(2, event.MessageDelta{MessageID: "x", Text: "because"})))
	assert.Equal(t, none, project(ev(3, event.MessageCompleted{MessageID: "x", Role: event.RoleAssistant, Text: "because", Purpose: event.PurposeExplanation})))
	assert.Empty(t, p.explanations)
	// A system message's text is agent text.
	assert.Equal(t, out{agentTextEvent("5", threadsapi.AgentTextEvent{ThreadID: id, MessageID: "s", Chunk: "Not run"}), true, false},
		project(ev(5, event.MessageDelta{MessageID: "s", Text: "Not run"})))
	assert.Equal(t, none, project(ev(6, event.ReasoningDelta{ReasoningID: "r", Text: "hmm"})))
	assert.Equal(t, none, project(ev(7, event.ToolApprovalRequested{CallID: "c", Name: "bash"})))

	// Pretty-printed JSON stays on one data line.
	o := project(ev(8, event.ToolCallCompleted{CallID: "c", Name: "write_file", Arguments: json.RawMessage("{\n  \"path\": \"a\",\n  \"n\": [1,\n 2]\n}")}))
	raw, err := EncodeEvent(o.e)
	require.NoError(t, err)
	assert.NotContains(t, raw.Data, "\n")
	assert.JSONEq(t, `{"tool_call_id":"c","tool_name":"write_file","arguments":{"path":"a","n":[1,2]}}`, raw.Data)
	o = project(ev(9, event.ToolExecCompleted{CallID: "c", Name: "write_file", Result: "{\n \"ok\": true\n}"}))
	raw, err = EncodeEvent(o.e)
	require.NoError(t, err)
	assert.JSONEq(t, `{"tool_result_id":"result-c","tool_call_id":"c","result":{"ok":true}}`, raw.Data)

	assert.Equal(t, out{errorEvent(10, "The run was stopped: a tool call was denied."), true, true}, project(ev(10, event.RunCancelled{Reason: event.CodeDenied})))
	assert.Equal(t, out{errorEvent(11, "The run was cancelled."), true, true}, project(ev(11, event.RunCancelled{Reason: "cancelled"})))
	assert.Equal(t, out{errorEvent(12, "The run failed."), true, true}, project(ev(12, event.RunFailed{Code: event.CodeInternal})))
	assert.Equal(t, out{doneEvent(13), true, true}, project(ev(13, event.RunCompleted{Reason: "final_answer"})))
}

func TestToolArguments(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"a":1}`, `{"a":1}`},
		{``, `{}`},
		{`  `, `{}`},
		{`null`, `{"value":null}`},
		{`[1, 2]`, `{"value":[1,2]}`},
		{`"text"`, `{"value":"text"}`},
		{`{"a":`, `{"value":"{\"a\":"}`},
	}
	for _, tt := range tests {
		b, err := json.Marshal(toolArguments(json.RawMessage(tt.in)))
		require.NoError(t, err)
		assert.JSONEq(t, tt.want, string(b), "toolArguments(%q)", tt.in)
	}
}

// TestProjectHistory covers what the history leaves out.
func TestProjectHistory(t *testing.T) {
	at := time.Date(2024, 1, 15, 10, 30, 0, 0, time.FixedZone("CET", 3600))
	ev := func(id string, pl event.Payload) event.Event {
		return event.Event{ID: id, Time: at, Payload: pl}
	}
	msgs := projectHistory([]event.Event{
		ev("1", event.RunStarted{}),
		ev("2", event.MessageUser{MessageID: "u", Text: "hi"}),
		ev("3", event.ReasoningCompleted{ReasoningID: "r", Text: "thinking"}),
		ev("4", event.MessageCompleted{MessageID: "x", Role: event.RoleAssistant, Text: "because", Purpose: event.PurposeExplanation}),
		ev("5", event.MessageCompleted{MessageID: "empty", Role: event.RoleAssistant}),
		ev("6", event.MessageCompleted{MessageID: "s", Role: event.RoleSystem, Text: "Not run"}),
		ev("7", event.ToolApprovalRequested{CallID: "c", Name: "bash"}),
		ev("8", event.RunCompleted{}),
		ev("9", event.MessageCompleted{MessageID: "cut", Role: event.RoleAssistant, Text: "The answer is", Incomplete: true}),
	})
	require.Len(t, msgs, 3)
	assert.False(t, msgs[1].Content.AgentContent.Incomplete.Set, "a complete message is not marked")
	assert.Equal(t, threadsapi.NewOptBool(true), msgs[2].Content.AgentContent.Incomplete, "an interrupted message is marked incomplete")
	assert.Equal(t, "The answer is", msgs[2].Content.AgentContent.Text)
	assert.Equal(t, "u", msgs[0].MessageID)
	assert.Equal(t, "s", msgs[1].MessageID)
	assert.Equal(t, threadsapi.MessageMessageTypeAgent, msgs[1].MessageType)
	assert.Equal(t, "Not run", msgs[1].Content.AgentContent.Text)
	assert.Equal(t, time.UTC, msgs[0].Timestamp.Location())
	assert.True(t, at.Equal(msgs[0].Timestamp))
	assert.NotNil(t, projectHistory(nil), "an empty history is [], not null")
}

// TestNotFoundBeforeAnyEvent: a thread with no events is unknown to GET and
// to the resume stream, and HEAD answers like GET.
func TestNotFoundBeforeAnyEvent(t *testing.T) {
	core := newFakeCore(t)
	_, c, _ := fakeServer(t, core)
	id := uuid.New()
	for _, call := range []func(*Client, uuid.UUID) error{history, resume} {
		var apiErr *APIError
		require.ErrorAs(t, call(c, id), &apiErr)
		assert.Equal(t, http.StatusNotFound, apiErr.StatusCode)
		assert.Equal(t, "thread not found", apiErr.Message)
	}

	core.add(id.String(), "r1", event.MessageUser{MessageID: "u1", Text: "hi"})
	req, err := http.NewRequestWithContext(t.Context(), http.MethodHead, c.threadURL(id, ""), nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	assert.Empty(t, body)
}

// FuzzProjectTool: whatever a model or a tool produced, the tool_call and
// tool_result events encode to one line of data that the decoders accept
// and that decodes to what was sent.
func FuzzProjectTool(f *testing.F) {
	for _, seed := range []struct {
		args, result string
		isErr        bool
	}{
		{`{"path":"."}`, "a.txt\nb/", false},
		{`[1, 2]`, `{"temperature": 72}`, false},
		{``, "boom", true},
		{"{\n \"a\": \"\\u2028\"\n}", "{\n}", false},
		{`{"a":`, "\xff\xfe", true},
		{`"text"`, `null`, false},
	} {
		f.Add(seed.args, seed.result, seed.isErr)
	}
	id := uuid.New()
	f.Fuzz(func(t *testing.T, args, result string, isErr bool) {
		p := newProjector(id)
		for seq, pl := range []event.Payload{
			event.ToolCallCompleted{CallID: "c", Name: "read", Arguments: json.RawMessage(args)},
			event.ToolExecCompleted{CallID: "c", Name: "read", Result: result, IsError: isErr},
		} {
			e, ok, _ := p.project(event.Event{Seq: int64(seq + 1), Payload: pl})
			require.True(t, ok)
			raw, err := EncodeEvent(e)
			require.NoError(t, err)
			require.NotContains(t, raw.Data, "\n", "data of %s", e.Type)
			back, err := DecodeEvent(raw)
			require.NoError(t, err, "DecodeEvent(%q)", raw.Data)
			require.Equal(t, e.Type, back.Type)
			again, err := EncodeEvent(back)
			require.NoError(t, err)
			require.JSONEq(t, raw.Data, again.Data)
		}
	})
}
