package threads_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/generated/threadsapi"
	"github.com/agentwire/agentwire/internal/config"
	"github.com/agentwire/agentwire/internal/protocol/threads"
	"github.com/agentwire/agentwire/internal/server"
	"github.com/agentwire/agentwire/internal/server/servertest"
)

// harness is a real agentwire server on a random port, with a typed client
// for its threads protocol.
type harness struct {
	t      *testing.T
	cfg    config.Config
	srv    *servertest.Server
	base   string // http://host:port
	client *threads.Client
}

// testConfig is the configuration the tests start from: the main listener
// on a free port, fresh data and working folders, and testdata/server.yaml.
// args override it (as command-line flags).
func testConfig(t *testing.T, args ...string) config.Config {
	t.Helper()
	return servertest.Config(t, append([]string{"--scenario", "testdata/server.yaml"}, args...)...)
}

// start builds and starts a server (with a 1 s heartbeat unless opts say);
// the test shuts it down at cleanup unless it does so itself, and fails if
// goroutines outlive it.
func start(t *testing.T, cfg config.Config, opts server.Options) *harness {
	t.Helper()
	if opts.Heartbeat == 0 {
		opts.Heartbeat = time.Second
	}
	h := &harness{t: t, cfg: cfg, srv: servertest.Start(t, cfg, servertest.Options{Server: opts})}
	h.base = "http://" + h.srv.Addr("main")
	var err error
	h.client, err = threads.NewClient(h.base, nil)
	require.NoError(t, err)
	return h
}

func (h *harness) shutdown() { h.srv.Stop() }

// send posts text to the thread and reads the stream to its end.
func (h *harness) send(thread uuid.UUID, text string) []threadsapi.StreamEvent {
	h.t.Helper()
	s, err := h.client.SendMessage(h.t.Context(), thread, text)
	require.NoError(h.t, err)
	defer s.Close()
	return readAll(h.t, s)
}

// history reads the thread's history with the generated client.
func (h *harness) history(thread uuid.UUID) []threadsapi.Message {
	h.t.Helper()
	res, err := h.client.History(h.t.Context(), thread)
	require.NoError(h.t, err)
	require.Equal(h.t, thread, res.ThreadID)
	return res.Messages
}

// readAll reads a stream until it ends, failing the test on any error.
func readAll(t *testing.T, s *threads.Stream) []threadsapi.StreamEvent {
	t.Helper()
	var got []threadsapi.StreamEvent
	for {
		e, err := s.Next(t.Context())
		if errors.Is(err, io.EOF) {
			return got
		}
		require.NoError(t, err, "after %d events", len(got))
		got = append(got, e)
	}
}

// readN reads n events.
func readN(t *testing.T, s *threads.Stream, n int) []threadsapi.StreamEvent {
	t.Helper()
	got := make([]threadsapi.StreamEvent, 0, n)
	for range n {
		e, err := s.Next(t.Context())
		require.NoError(t, err)
		got = append(got, e)
	}
	return got
}

// shape is the stream's event names with runs of agent_text collapsed, to
// compare a stream's structure: "agent_text tool_call tool_result done".
func shape(events []threadsapi.StreamEvent) string {
	var names []string
	for _, e := range events {
		if n := len(names); n > 0 && string(e.Type) == threads.EventAgentText && names[n-1] == string(e.Type) {
			continue
		}
		names = append(names, string(e.Type))
	}
	return strings.Join(names, " ")
}

// checkIDs checks that every event carries an id, a seq, and that the ids
// increase along the stream (the projection makes at most one SSE event of
// a log event, so they strictly increase).
func checkIDs(t *testing.T, events []threadsapi.StreamEvent) {
	t.Helper()
	prev := int64(0)
	for i, e := range events {
		seq, err := strconv.ParseInt(threads.EventID(e), 10, 64)
		require.NoError(t, err, "event %d (%s) id %q", i, string(e.Type), threads.EventID(e))
		require.Greater(t, seq, prev, "event %d (%s): ids must increase", i, string(e.Type))
		prev = seq
	}
}

// agentTexts joins each agent message's chunks, in the order the messages
// began, checking that every chunk names the thread.
func agentTexts(t *testing.T, thread uuid.UUID, events []threadsapi.StreamEvent) (ids []string, texts map[string]string) {
	t.Helper()
	texts = map[string]string{}
	for _, e := range events {
		if string(e.Type) != threads.EventAgentText {
			continue
		}
		require.Equal(t, thread, e.AgentTextSSE.Data.ThreadID, "agent_text of another thread")
		id := e.AgentTextSSE.Data.MessageID
		require.NotEmpty(t, id)
		if _, ok := texts[id]; !ok {
			ids = append(ids, id)
		}
		texts[id] += e.AgentTextSSE.Data.Chunk
	}
	return ids, texts
}

// jsonEq compares a JSONObject with the JSON text want.
func jsonEq(t *testing.T, want string, got threadsapi.JSONObject) {
	t.Helper()
	b, err := json.Marshal(got)
	require.NoError(t, err)
	require.JSONEq(t, want, string(b))
}

// field decodes one member of a JSONObject.
func field[T any](t *testing.T, obj threadsapi.JSONObject, name string) T {
	t.Helper()
	raw, ok := obj[name]
	require.True(t, ok, "no member %q in %v", name, obj)
	var v T
	require.NoError(t, json.Unmarshal(raw, &v))
	return v
}

// TestSendMessageDefaultScenario drives the built-in scenario's "list the
// files" turn: text, the ls call and its result, text, done; then the
// history shows the same messages with the same ids.
func TestSendMessageDefaultScenario(t *testing.T) {
	cfg := testConfig(t, "--scenario", "")
	require.NoError(t, os.WriteFile(filepath.Join(cfg.Workdir, "notes.txt"), []byte("hello\n"), 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(cfg.Workdir, "src"), 0o755))
	h := start(t, cfg, server.Options{})
	thread := uuid.New()
	before := time.Now().UTC().Add(-time.Second)

	events := h.send(thread, "list the files")
	require.Equal(t, "agent_text tool_call tool_result agent_text done", shape(events))
	checkIDs(t, events)
	ids, texts := agentTexts(t, thread, events)
	require.Len(t, ids, 2, "one message_id per agent message")
	assert.Equal(t, "Let me look at the working folder.", texts[ids[0]])
	assert.Contains(t, texts[ids[1]], "notes.txt")

	var call *threadsapi.ToolCallEvent
	var result *threadsapi.ToolResultEvent
	for _, e := range events {
		switch string(e.Type) {
		case threads.EventToolCall:
			call = &e.ToolCallSSE.Data
		case threads.EventToolResult:
			result = &e.ToolResultSSE.Data
		}
	}
	assert.Equal(t, "ls", call.ToolName)
	jsonEq(t, `{"path":"."}`, call.Arguments)
	assert.Equal(t, call.ToolCallID, result.ToolCallID)
	assert.Equal(t, "result-"+call.ToolCallID, result.ToolResultID)
	out := field[string](t, result.Result, "output") // ls prints text, not a JSON object
	assert.Contains(t, out, "notes.txt")
	assert.Contains(t, out, "src/")

	msgs := h.history(thread)
	require.Len(t, msgs, 5)
	for i, m := range msgs {
		assert.Equal(t, string(m.MessageType), string(m.Content.Type), "message %d: message_type and content.type", i)
		assert.NotEmpty(t, m.MessageID, "message %d", i)
		assert.Equal(t, time.UTC, m.Timestamp.Location(), "message %d", i)
		assert.True(t, m.Timestamp.After(before) && m.Timestamp.Before(time.Now().Add(time.Second)), "message %d at %v", i, m.Timestamp)
		if i > 0 {
			assert.False(t, m.Timestamp.Before(msgs[i-1].Timestamp), "message %d is older than the one before", i)
		}
	}
	assert.Equal(t, threadsapi.UserContent{Type: "user", Text: "list the files"}, msgs[0].Content.UserContent)
	assert.Equal(t, threadsapi.MessageMessageTypeAgent, msgs[1].MessageType)
	assert.Equal(t, ids[0], msgs[1].MessageID, "the streamed message_id is the history's")
	assert.Equal(t, texts[ids[0]], msgs[1].Content.AgentContent.Text)
	assert.Equal(t, threadsapi.MessageMessageTypeToolCall, msgs[2].MessageType)
	assert.Equal(t, call.ToolCallID, msgs[2].Content.ToolCallContent.ToolCallID)
	assert.Equal(t, "ls", msgs[2].Content.ToolCallContent.ToolName)
	jsonEq(t, `{"path":"."}`, msgs[2].Content.ToolCallContent.Arguments)
	assert.Equal(t, threadsapi.MessageMessageTypeToolResult, msgs[3].MessageType)
	assert.Equal(t, result.ToolResultID, msgs[3].Content.ToolResultContent.ToolResultID)
	assert.Equal(t, call.ToolCallID, msgs[3].Content.ToolResultContent.ToolCallID)
	assert.Equal(t, out, field[string](t, msgs[3].Content.ToolResultContent.Result, "output"))
	assert.Equal(t, ids[1], msgs[4].MessageID)
	assert.Equal(t, texts[ids[1]], msgs[4].Content.AgentContent.Text)
}

// TestGeneratedClient reads a POST stream and its resumption with the
// clients ogen generates from the document, so the wire is checked by the
// document's own decoders.
func TestGeneratedClient(t *testing.T) {
	h := start(t, testConfig(t), server.Options{})
	api, err := threadsapi.NewClient(h.base, threads.Bearer(""))
	require.NoError(t, err)
	thread := uuid.New()

	res, err := api.SendMessage(t.Context(), &threadsapi.SendMessageRequest{Text: "echo generated"}, threadsapi.SendMessageParams{ThreadID: thread})
	require.NoError(t, err)
	post, ok := res.(*threadsapi.SendMessageOK)
	require.True(t, ok, "SendMessage = %T, want *SendMessageOK", res)
	var ids []string
	var text strings.Builder
	for { // never read past done: the generated stream would reconnect by posting again
		ev, err := post.Next(t.Context())
		require.NoError(t, err)
		if ev.Type == threadsapi.DoneSSEStreamEvent {
			ids = append(ids, ev.DoneSSE.ID)
			break
		}
		require.Equal(t, threadsapi.AgentTextSSEStreamEvent, ev.Type)
		require.Equal(t, thread, ev.AgentTextSSE.Data.ThreadID)
		text.WriteString(ev.AgentTextSSE.Data.Chunk)
		ids = append(ids, ev.AgentTextSSE.ID)
	}
	require.NoError(t, post.Close())
	assert.Equal(t, "You said: echo generated", text.String())

	// Resume after the first chunk: the rest, then done.
	res2, err := api.StreamEvents(t.Context(), threadsapi.StreamEventsParams{ThreadID: thread, LastEventID: threadsapi.NewOptString(ids[0])})
	require.NoError(t, err)
	resumed, ok := res2.(*threadsapi.StreamEventsOK)
	require.True(t, ok, "StreamEvents = %T", res2)
	defer resumed.Close()
	for _, want := range ids[1:] {
		ev, err := resumed.Next(t.Context())
		require.NoError(t, err)
		switch ev.Type {
		case threadsapi.AgentTextSSEStreamEvent:
			assert.Equal(t, want, ev.AgentTextSSE.ID)
		case threadsapi.DoneSSEStreamEvent:
			assert.Equal(t, want, ev.DoneSSE.ID)
		default:
			t.Fatalf("resumed event %v", ev.Type)
		}
	}

	// Errors decode as the document's types.
	res3, err := api.GetThread(t.Context(), threadsapi.GetThreadParams{ThreadID: uuid.New()})
	require.NoError(t, err)
	require.Equal(t, &threadsapi.GetThreadNotFound{Error: "thread not found"}, res3)
}

// TestStreamHeadersAndHeartbeat reads a raw POST response: the headers
// proxies need, an id on every event, and ": ping" comments while the
// model is silent.
func TestStreamHeadersAndHeartbeat(t *testing.T) {
	h := start(t, testConfig(t), server.Options{Heartbeat: 5 * time.Millisecond})
	url := h.base + "/api/v1/threads/" + uuid.NewString()
	resp, err := http.Post(url, "application/json", strings.NewReader(`{"text":"patience, please"}`))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	assert.Equal(t, "no-cache", resp.Header.Get("Cache-Control"))
	assert.Equal(t, "no", resp.Header.Get("X-Accel-Buffering"))

	var pingsBeforeFirstEvent, events int
	var lastField string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == ": ping":
			if events == 0 {
				pingsBeforeFirstEvent++
			}
		case strings.HasPrefix(line, "event: "):
			require.True(t, strings.HasPrefix(lastField, "id: "), "event %q without an id before it", line)
			events++
		}
		if line != "" {
			lastField = line
		}
	}
	require.NoError(t, sc.Err())
	assert.Positive(t, pingsBeforeFirstEvent, "no heartbeat while the model waited")
	assert.Positive(t, events)
	assert.Equal(t, "data: {}", lastField, "the stream ends with done")
}

// TestBadRequests checks every request the server must refuse before
// anything runs: 400 for malformed ids, bodies and headers, 404 for unknown
// threads, 405 for other methods; each with the documented JSON body.
func TestBadRequests(t *testing.T) {
	h := start(t, testConfig(t), server.Options{})
	thread := uuid.NewString()
	path := "/api/v1/threads/" + thread
	huge := `{"text":"` + strings.Repeat("a", threads.MaxBodyBytes) + `"}`
	tests := []struct {
		name, method, path, contentType, body string
		header                                [2]string
		status                                int
		want                                  string // in the error message
	}{
		{"GET: id not a UUID", "GET", "/api/v1/threads/not-a-uuid", "", "", [2]string{}, 400, `threadId "not-a-uuid": must be a UUID`},
		{"GET: id without hyphens", "GET", "/api/v1/threads/550e8400e29b41d4a716446655440000", "", "", [2]string{}, 400, "must be a UUID"},
		{"GET: id in braces", "GET", "/api/v1/threads/%7B550e8400-e29b-41d4-a716-446655440000%7D", "", "", [2]string{}, 400, "must be a UUID"},
		{"GET: unknown thread", "GET", path, "", "", [2]string{}, 404, "thread not found"},
		{"POST: id not a UUID", "POST", "/api/v1/threads/123", "application/json", `{"text":"hi"}`, [2]string{}, 400, "must be a UUID"},
		{"POST: no text", "POST", path, "application/json", `{}`, [2]string{}, 400, "invalid request body: /text: is required"},
		{"POST: text a number", "POST", path, "application/json", `{"text":42}`, [2]string{}, 400, "invalid request body: /text: must be string"},
		{"POST: empty text", "POST", path, "application/json", `{"text":""}`, [2]string{}, 400, "invalid request body: /text: must be at least 1 characters"},
		{"POST: not JSON", "POST", path, "application/json", `hello`, [2]string{}, 400, "invalid request body: invalid JSON"},
		{"POST: empty body", "POST", path, "application/json", ``, [2]string{}, 400, "invalid request body: invalid JSON"},
		{"POST: array", "POST", path, "application/json", `["hi"]`, [2]string{}, 400, "invalid request body: must be object"},
		{"POST: too large", "POST", path, "application/json", huge, [2]string{}, 400, "exceeds 1048576 bytes"},
		{"POST: text/plain", "POST", path, "text/plain", `{"text":"hi"}`, [2]string{}, 400, `Content-Type must be application/json, got "text/plain"`},
		{"POST: no Content-Type", "POST", path, "", `{"text":"hi"}`, [2]string{}, 400, "Content-Type must be application/json"},
		{"events: id not a UUID", "GET", "/api/v1/threads/x/events", "", "", [2]string{}, 400, "must be a UUID"},
		{"events: unknown thread", "GET", path + "/events", "", "", [2]string{}, 404, "thread not found"},
		{"events: Last-Event-ID not a number", "GET", path + "/events", "", "", [2]string{"Last-Event-ID", "abc"}, 400, `Last-Event-ID "abc"`},
		{"events: Last-Event-ID negative", "GET", path + "/events", "", "", [2]string{"Last-Event-ID", "-1"}, 400, `Last-Event-ID "-1"`},
		{"events: Last-Event-ID too large", "GET", path + "/events", "", "", [2]string{"Last-Event-ID", "99999999999999999999"}, 400, "Last-Event-ID"},
		{"PUT", "PUT", path, "application/json", `{"text":"hi"}`, [2]string{}, 405, "method PUT is not allowed"},
		{"DELETE events", "DELETE", path + "/events", "", "", [2]string{}, 405, "method DELETE is not allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), tt.method, h.base+tt.path, strings.NewReader(tt.body))
			require.NoError(t, err)
			if tt.contentType != "" {
				req.Header.Set("Content-Type", tt.contentType)
			}
			if tt.header[0] != "" {
				req.Header.Set(tt.header[0], tt.header[1])
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.Equal(t, tt.status, resp.StatusCode, "body %s", body)
			assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			e, err := threads.DecodeError(body)
			require.NoError(t, err, "body %s", body)
			assert.Contains(t, e.Error, tt.want)
			if tt.status == 405 {
				assert.NotEmpty(t, resp.Header.Get("Allow"))
			}
		})
	}
	// None of them created the thread.
	_, err := h.client.History(t.Context(), uuid.MustParse(thread))
	var apiErr *threads.APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, http.StatusNotFound, apiErr.StatusCode)
	require.Equal(t, "thread not found", apiErr.Message)
}

// TestUpperCaseThreadID: a UUID in either case names the same thread.
func TestUpperCaseThreadID(t *testing.T) {
	h := start(t, testConfig(t), server.Options{})
	thread := uuid.New()
	resp, err := http.Post(h.base+"/api/v1/threads/"+strings.ToUpper(thread.String()), "application/json", strings.NewReader(`{"text":"echo upper"}`))
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	msgs := h.history(thread)
	require.Len(t, msgs, 2)
	assert.Equal(t, "echo upper", msgs[0].Content.UserContent.Text)
}

// TestOwnListener: --listen threads=addr serves the protocol on its own
// address too, over the same threads.
func TestOwnListener(t *testing.T) {
	h := start(t, testConfig(t, "--listen", "threads=127.0.0.1:0"), server.Options{})
	own := h.srv.Addr("threads")
	require.NotEmpty(t, own)
	require.NotEqual(t, h.srv.Addr("main"), own)
	assert.Contains(t, h.srv.Banner(), "http://"+h.srv.Addr("main")+"/api/v1/threads/{threadId}")

	c, err := threads.NewClient("http://"+own, nil)
	require.NoError(t, err)
	thread := uuid.New()
	s, err := c.SendMessage(t.Context(), thread, "echo own")
	require.NoError(t, err)
	defer s.Close()
	require.Equal(t, "agent_text done", shape(readAll(t, s)))
	assert.Len(t, h.history(thread), 2, "the main listener serves the same thread")
}

// TestToolResults covers the result conventions: a tool output that is a
// JSON object is the result itself; failures are error-<id> with
// {"error", "tool"}; arguments that are not an object are wrapped.
func TestToolResults(t *testing.T) {
	cfg := testConfig(t)
	require.NoError(t, os.WriteFile(filepath.Join(cfg.Workdir, "weather.json"), []byte(`{"temperature": 72, "condition": "sunny"}`+"\n"), 0o644))
	h := start(t, cfg, server.Options{})

	t.Run("JSON object output", func(t *testing.T) {
		thread := uuid.New()
		events := h.send(thread, "what is the weather?")
		require.Equal(t, "agent_text tool_call tool_result agent_text done", shape(events))
		var r threadsapi.StreamEvent
		for _, e := range events {
			if string(e.Type) == threads.EventToolResult {
				r = e
			}
		}
		assert.True(t, strings.HasPrefix(r.ToolResultSSE.Data.ToolResultID, "result-"))
		jsonEq(t, `{"temperature":72,"condition":"sunny"}`, r.ToolResultSSE.Data.Result)
		msgs := h.history(thread)
		require.Len(t, msgs, 5)
		jsonEq(t, `{"temperature":72,"condition":"sunny"}`, msgs[3].Content.ToolResultContent.Result)
	})

	t.Run("failures and odd arguments", func(t *testing.T) {
		thread := uuid.New()
		events := h.send(thread, "make some odd calls")
		checkIDs(t, events)
		calls := map[string]*threadsapi.ToolCallEvent{}
		var order []string
		results := map[string]*threadsapi.ToolResultEvent{}
		for _, e := range events {
			switch string(e.Type) {
			case threads.EventToolCall:
				calls[e.ToolCallSSE.Data.ToolCallID] = &e.ToolCallSSE.Data
				order = append(order, e.ToolCallSSE.Data.ToolCallID)
			case threads.EventToolResult:
				_, called := calls[e.ToolResultSSE.Data.ToolCallID]
				require.True(t, called, "result before its call")
				results[e.ToolResultSSE.Data.ToolCallID] = &e.ToolResultSSE.Data
			}
		}
		require.Len(t, order, 4)
		require.Len(t, results, 4)
		wantArgs := []string{`{"value":[1,2]}`, `{"value":"not json"}`, `{"path":"missing.txt"}`, `{}`}
		wantTool := []string{"read", "read", "read", "no_such_tool"}
		for i, id := range order {
			jsonEq(t, wantArgs[i], calls[id].Arguments)
			r := results[id]
			assert.Equal(t, "error-"+id, r.ToolResultID, "call %d", i)
			assert.Equal(t, wantTool[i], field[string](t, r.Result, "tool"), "call %d", i)
			assert.NotEmpty(t, field[string](t, r.Result, "error"), "call %d", i)
			assert.Len(t, r.Result, 2, "call %d: result %v", i, r.Result)
		}
		assert.Equal(t, threads.EventDone, string(events[len(events)-1].Type))

		// The history holds the same calls and results.
		var histCalls, histResults int
		for _, m := range h.history(thread) {
			switch m.MessageType {
			case threadsapi.MessageMessageTypeToolCall:
				c := m.Content.ToolCallContent
				jsonEq(t, mustJSON(t, calls[c.ToolCallID].Arguments), c.Arguments)
				histCalls++
			case threadsapi.MessageMessageTypeToolResult:
				r := m.Content.ToolResultContent
				assert.Equal(t, results[r.ToolCallID].ToolResultID, r.ToolResultID)
				jsonEq(t, mustJSON(t, results[r.ToolCallID].Result), r.Result)
				histResults++
			}
		}
		assert.Equal(t, 4, histCalls)
		assert.Equal(t, 4, histResults)
	})
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// TestCallNeedingApproval: a run of this protocol cannot ask for approval,
// so the call is not run and its result says why, once.
func TestCallNeedingApproval(t *testing.T) {
	h := start(t, testConfig(t), server.Options{})
	thread := uuid.New()
	events := h.send(thread, "touch a file")
	require.Equal(t, "agent_text tool_call tool_result agent_text done", shape(events))
	ids, texts := agentTexts(t, thread, events)
	require.Len(t, ids, 2)
	var result *threadsapi.ToolResultEvent
	for _, e := range events {
		if string(e.Type) == threads.EventToolResult {
			result = &e.ToolResultSSE.Data
		}
	}
	assert.True(t, strings.HasPrefix(result.ToolResultID, "error-"), result.ToolResultID)
	assert.Equal(t, "bash", field[string](t, result.Result, "tool"))
	assert.Contains(t, field[string](t, result.Result, "error"), "needs approval")
	assert.Equal(t, "The command did not run.", texts[ids[1]])
	_, err := os.Stat(filepath.Join(h.cfg.Workdir, "made.txt"))
	assert.ErrorIs(t, err, os.ErrNotExist, "the command ran without approval")

	var agent []string
	for _, m := range h.history(thread) {
		if m.MessageType == threadsapi.MessageMessageTypeAgent {
			assert.Equal(t, texts[m.MessageID], m.Content.AgentContent.Text)
			agent = append(agent, m.MessageID)
		}
	}
	assert.Equal(t, ids, agent)
}

// TestRunFailure: a run that fails ends the stream with an error event.
func TestRunFailure(t *testing.T) {
	h := start(t, testConfig(t), server.Options{})
	thread := uuid.New()
	events := h.send(thread, "break, please")
	require.Equal(t, "agent_text error", shape(events))
	checkIDs(t, events)
	last := events[len(events)-1]
	assert.Contains(t, last.ErrorSSE.Data.Error, "failed on purpose")
	assert.Equal(t, "break, please", h.history(thread)[0].Content.UserContent.Text)

	// Resuming after the error reports the same end.
	s, err := h.client.Resume(t.Context(), thread, threads.EventID(events[0]))
	require.NoError(t, err)
	defer s.Close()
	resumed := readAll(t, s)
	require.Equal(t, events[1:], resumed)
}

// TestShutdownCancelsRun: a run still going when the shutdown grace ends
// is cancelled, and its POST stream says so before the server closes it.
func TestShutdownCancelsRun(t *testing.T) {
	h := start(t, testConfig(t, "--shutdown-grace", "1ms"), server.Options{})
	thread := uuid.New()
	s, err := h.client.SendMessage(t.Context(), thread, "go on forever")
	require.NoError(t, err)
	defer s.Close()
	first := readN(t, s, 1)
	require.Equal(t, threads.EventAgentText, string(first[0].Type))

	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		done <- h.srv.Shutdown(ctx)
	}()
	rest := readAll(t, s)
	require.NotEmpty(t, rest)
	last := rest[len(rest)-1]
	require.Equal(t, threads.EventError, string(last.Type))
	assert.Equal(t, "The run was cancelled.", last.ErrorSSE.Data.Error)
	require.NoError(t, <-done)
}

// TestDisconnectDoesNotStopRun: a client that goes away mid-stream leaves
// the run going; the thread's stream and history later show it complete.
func TestDisconnectDoesNotStopRun(t *testing.T) {
	h := start(t, testConfig(t), server.Options{})
	thread := uuid.New()
	ctx, cancel := context.WithCancel(t.Context())
	s, err := h.client.SendMessage(ctx, thread, "speak slowly")
	require.NoError(t, err)
	readN(t, s, 2)
	cancel()
	_, err = s.Next(ctx)
	require.ErrorIs(t, err, context.Canceled)

	// Wait for the run's end by following the thread from the start.
	r, err := h.client.Resume(t.Context(), thread, "")
	require.NoError(t, err)
	defer r.Close()
	all := readAll(t, r)
	require.Equal(t, "agent_text tool_call tool_result agent_text done", shape(all))

	msgs := h.history(thread)
	require.Len(t, msgs, 5)
	assert.Equal(t, threadsapi.MessageMessageTypeAgent, msgs[4].MessageType)
	assert.True(t, strings.HasSuffix(msgs[4].Content.AgentContent.Text, "and then the run completes."), msgs[4].Content.AgentContent.Text)
}

// TestReconnectAndResume: a client that lost its POST stream resumes with
// the last id it got and receives exactly what it missed, then the live
// tail until done.
func TestReconnectAndResume(t *testing.T) {
	h := start(t, testConfig(t), server.Options{})
	thread := uuid.New()
	ctx, cancel := context.WithCancel(t.Context())
	s, err := h.client.SendMessage(ctx, thread, "speak slowly")
	require.NoError(t, err)
	got := readN(t, s, 3)
	last := s.LastEventID()
	require.Equal(t, threads.EventID(got[2]), last)
	cancel() // the connection drops

	r, err := h.client.Resume(t.Context(), thread, last)
	require.NoError(t, err)
	defer r.Close()
	got = append(got, readAll(t, r)...)
	checkIDs(t, got) // no duplicate at the seam
	require.Equal(t, "agent_text tool_call tool_result agent_text done", shape(got))

	// Nothing was lost: the chunks add up to the history's messages.
	ids, texts := agentTexts(t, thread, got)
	var agent []string
	for _, m := range h.history(thread) {
		if m.MessageType == threadsapi.MessageMessageTypeAgent {
			agent = append(agent, m.MessageID)
			assert.Equal(t, m.Content.AgentContent.Text, texts[m.MessageID])
		}
	}
	assert.Equal(t, agent, ids)

	// The whole run, replayed from the start, is what a live client saw.
	replay, err := h.client.Resume(t.Context(), thread, "")
	require.NoError(t, err)
	defer replay.Close()
	require.Equal(t, got, readAll(t, replay))

	// Resuming after the end answers done at once, without an id field:
	// the client has had every event, and its position stays where it
	// was (as an EventSource keeps it, the client reports the id it
	// resumed from).
	lastID := threads.EventID(got[len(got)-1])
	again, err := h.client.Resume(t.Context(), thread, lastID)
	require.NoError(t, err)
	defer again.Close()
	end := readAll(t, again)
	require.Len(t, end, 1)
	assert.Equal(t, threads.EventDone, string(end[0].Type))
	assert.Equal(t, lastID, again.LastEventID(), "the client's position moved")
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, h.base+"/api/v1/threads/"+thread.String()+"/events", nil)
	require.NoError(t, err)
	req.Header.Set("Last-Event-ID", lastID)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	assert.Equal(t, "event: done\ndata: {}\n\n", string(raw), "a quiet thread's done, with no id the client had")

	// An id past the thread's end is refused.
	_, err = h.client.Resume(t.Context(), thread, "100000")
	var apiErr *threads.APIError
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusBadRequest, apiErr.StatusCode)
}

// TestResumeFollowsLiveRun: a second client that opens the thread's stream
// while a run goes on sees the same events as the client that posted.
func TestResumeFollowsLiveRun(t *testing.T) {
	h := start(t, testConfig(t), server.Options{})
	thread := uuid.New()
	s, err := h.client.SendMessage(t.Context(), thread, "speak slowly")
	require.NoError(t, err)
	defer s.Close()
	first := readN(t, s, 1)

	watcher, err := h.client.Resume(t.Context(), thread, "")
	require.NoError(t, err)
	defer watcher.Close()
	var watched []threadsapi.StreamEvent
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			e, err := watcher.Next(t.Context())
			if err != nil {
				assert.ErrorIs(t, err, io.EOF)
				return
			}
			watched = append(watched, e)
		}
	})
	posted := append(first, readAll(t, s)...)
	wg.Wait()
	require.Equal(t, posted, watched)
}

// TestQueuedMessageStreamsItsOwnRun: a message posted while the thread's
// run goes on waits for its own run, and each stream shows only its run.
func TestQueuedMessageStreamsItsOwnRun(t *testing.T) {
	h := start(t, testConfig(t), server.Options{})
	thread := uuid.New()
	slow, err := h.client.SendMessage(t.Context(), thread, "speak slowly")
	require.NoError(t, err)
	defer slow.Close()
	firstSlow := readN(t, slow, 1)

	queued := h.send(thread, "echo queued")
	require.Equal(t, "agent_text done", shape(queued))
	_, texts := agentTexts(t, thread, queued)
	require.Len(t, texts, 1)
	for _, text := range texts {
		assert.Equal(t, "You said: echo queued", text)
	}

	rest := append(firstSlow, readAll(t, slow)...)
	require.Equal(t, "agent_text tool_call tool_result agent_text done", shape(rest))
	lastSlow, _ := strconv.Atoi(threads.EventID(rest[len(rest)-1]))
	firstQueued, _ := strconv.Atoi(threads.EventID(queued[0]))
	assert.Greater(t, firstQueued, lastSlow, "the queued run began after the first ended")

	var users []string
	for _, m := range h.history(thread) {
		if m.MessageType == threadsapi.MessageMessageTypeUser {
			users = append(users, m.Content.UserContent.Text)
		}
	}
	assert.Equal(t, []string{"speak slowly", "echo queued"}, users)
}

// TestRestartBetweenTurns: the history and the event ids survive a restart,
// and the thread continues on the new process.
func TestRestartBetweenTurns(t *testing.T) {
	cfg := testConfig(t)
	h1 := start(t, cfg, server.Options{})
	thread := uuid.New()
	turn1 := h1.send(thread, "echo one")
	require.Equal(t, "agent_text done", shape(turn1))
	hist1 := h1.history(thread)
	h1.shutdown()

	h2 := start(t, cfg, server.Options{})
	require.Equal(t, hist1, h2.history(thread))
	replay, err := h2.client.Resume(t.Context(), thread, "")
	require.NoError(t, err)
	defer replay.Close()
	require.Equal(t, turn1, readAll(t, replay))

	turn2 := h2.send(thread, "echo two")
	require.Equal(t, "agent_text done", shape(turn2))
	checkIDs(t, append(append([]threadsapi.StreamEvent(nil), turn1...), turn2...))
	hist2 := h2.history(thread)
	require.Len(t, hist2, 4)
	require.Equal(t, hist1, hist2[:2])
	assert.Equal(t, "echo two", hist2[2].Content.UserContent.Text)
	assert.Equal(t, "You said: echo two", hist2[3].Content.AgentContent.Text)
}

// TestConcurrentSessions runs 50 threads at once: every stream carries its
// own thread's events only, and every history its own conversation.
func TestConcurrentSessions(t *testing.T) {
	h := start(t, testConfig(t), server.Options{})
	const n = 50
	ids := make([]uuid.UUID, n)
	streams := make([][]threadsapi.StreamEvent, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		ids[i] = uuid.New()
		wg.Go(func() {
			s, err := h.client.SendMessage(t.Context(), ids[i], fmt.Sprintf("echo %d %s", i, ids[i]))
			if err != nil {
				errs[i] = err
				return
			}
			defer s.Close()
			for {
				e, err := s.Next(t.Context())
				if errors.Is(err, io.EOF) {
					return
				}
				if err != nil {
					errs[i] = err
					return
				}
				streams[i] = append(streams[i], e)
			}
		})
	}
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i], "session %d", i)
		want := fmt.Sprintf("echo %d %s", i, ids[i])
		require.Equal(t, "agent_text done", shape(streams[i]), "session %d", i)
		checkIDs(t, streams[i])
		_, texts := agentTexts(t, ids[i], streams[i]) // fails on another thread's chunk
		require.Len(t, texts, 1, "session %d", i)
		for _, text := range texts {
			require.Equal(t, "You said: "+want, text, "session %d", i)
		}
		msgs := h.history(ids[i])
		require.Len(t, msgs, 2, "session %d", i)
		require.Equal(t, want, msgs[0].Content.UserContent.Text)
		require.Equal(t, "You said: "+want, msgs[1].Content.AgentContent.Text)
	}
}

// TestManyWatchersSeeTheSameEvents: streams of one thread share each
// event's encoding; every one of them still gets every event, in order,
// exactly as the stream that posted the message.
func TestManyWatchersSeeTheSameEvents(t *testing.T) {
	h := start(t, testConfig(t), server.Options{})
	thread := uuid.New()
	s, err := h.client.SendMessage(t.Context(), thread, "speak slowly")
	require.NoError(t, err)
	defer s.Close()
	first := readN(t, s, 1)

	const watchers = 8
	watched := make([][]threadsapi.StreamEvent, watchers)
	var wg sync.WaitGroup
	for i := range watchers {
		w, err := h.client.Resume(t.Context(), thread, "")
		require.NoError(t, err)
		defer w.Close()
		wg.Go(func() {
			for {
				e, err := w.Next(t.Context())
				if err != nil {
					assert.ErrorIs(t, err, io.EOF)
					return
				}
				watched[i] = append(watched[i], e)
			}
		})
	}
	posted := append(first, readAll(t, s)...)
	wg.Wait()
	for i := range watchers {
		require.Equal(t, posted, watched[i], "watcher %d", i)
	}
}

// TestSlowWatcherHoldsNobodyUp: one subscriber of a thread stops reading
// while a run streams 8 MiB of text in 4 KiB chunks (the subscribers
// join as it begins), far more than the
// kernel buffers between it and the server hold (its receive buffer is
// fixed at 4 KiB; tcp_wmem's maximum is 4 MiB here). The poster and three
// other subscribers receive the whole run meanwhile, all the same events.
// Then the slow one reads, resuming from its last id whenever the server
// gave up on it, and gets the same events too, each once.
func TestSlowWatcherHoldsNobodyUp(t *testing.T) {
	h := start(t, testConfig(t), server.Options{})
	thread := uuid.New()
	before := h.send(thread, "echo first")
	from := threads.EventID(before[len(before)-1])

	// The first connection has the small buffer; those it resumes on
	// later (when the server gave up on it meanwhile) read at full speed.
	var d net.Dialer
	var mu sync.Mutex
	var slowConn *net.TCPConn
	slowClient, err := threads.NewClient(h.base, &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			mu.Lock()
			defer mu.Unlock()
			if slowConn != nil {
				return c, nil
			}
			slowConn = c.(*net.TCPConn)
			return c, slowConn.SetReadBuffer(4 << 10)
		},
	}})
	require.NoError(t, err)
	// The subscribers join once the run has begun: a stream opened
	// after the thread's last run ended replays that end and closes.
	s, err := h.client.SendMessage(t.Context(), thread, "flood please")
	require.NoError(t, err)
	defer s.Close()
	slow, err := slowClient.Resume(t.Context(), thread, from)
	require.NoError(t, err)
	defer slow.Close()

	const watchers = 3
	watched := make([][]threadsapi.StreamEvent, watchers)
	var wg sync.WaitGroup
	for i := range watchers {
		w, err := h.client.Resume(t.Context(), thread, from)
		require.NoError(t, err)
		defer w.Close()
		wg.Go(func() {
			for {
				e, err := w.Next(t.Context())
				if err != nil {
					assert.ErrorIs(t, err, io.EOF, "watcher %d", i)
					return
				}
				watched[i] = append(watched[i], e)
			}
		})
	}
	posted := readAll(t, s)
	wg.Wait()
	require.Equal(t, threads.EventDone, string(posted[len(posted)-1].Type))
	var text int
	for _, e := range posted {
		if string(e.Type) == threads.EventAgentText {
			text += len(e.AgentTextSSE.Data.Chunk)
		}
	}
	require.Equal(t, 8<<20+len("Flooded."), text, "the whole flood reached the poster")
	require.Equal(t, posted, watched[0][len(watched[0])-len(posted):], "the poster saw the run as the watchers did")
	for i := range watchers {
		require.Equal(t, watched[0], watched[i], "watcher %d", i)
	}

	// Only now does the slow subscriber read, as fast as it can.
	t.Logf("the others have the run (%d events); the slow subscriber reads", len(posted))
	mu.Lock()
	_ = slowConn.SetReadBuffer(4 << 20)
	mu.Unlock()
	var got []threadsapi.StreamEvent
	for resumes := 0; ; resumes++ {
		require.Less(t, resumes, 100, "the slow subscriber keeps being cut off")
		for {
			e, err := slow.Next(t.Context())
			if err != nil {
				break
			}
			got = append(got, e)
		}
		if n := len(got); n > 0 && string(got[n-1].Type) == threads.EventDone {
			break
		}
		slow.Close()
		last := from
		if len(got) > 0 {
			last = threads.EventID(got[len(got)-1])
		}
		slow, err = slowClient.Resume(t.Context(), thread, last)
		require.NoError(t, err)
	}
	require.Equal(t, watched[0], got, "the slow subscriber got every event once")
}

// TestResumeAtRandomPositions: a client loses its stream 200 times at
// random points of a reply streamed word by word, resuming each time with
// the last id it got. What it received, in order, is what a client that
// never lost its stream received: the reply's text exactly, no chunk twice,
// none missing.
func TestResumeAtRandomPositions(t *testing.T) {
	h := start(t, testConfig(t), server.Options{})
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	thread := uuid.New()

	s, err := h.client.SendMessage(t.Context(), thread, "many words please")
	require.NoError(t, err)
	// A watcher that never loses its stream: what the resuming client
	// must end up with.
	whole, err := h.client.Resume(t.Context(), thread, "")
	require.NoError(t, err)
	defer whole.Close()

	var got []threadsapi.StreamEvent
	read := func(s *threads.Stream, n int) bool {
		for range n {
			e, err := s.Next(t.Context())
			if errors.Is(err, io.EOF) {
				return true
			}
			require.NoError(t, err)
			got = append(got, e)
		}
		return false
	}
	ended := read(s, 1+rng.IntN(4))
	s.Close()
	resumes := 0
	for ; !ended; resumes++ {
		n := 1 + rng.IntN(4)
		if resumes == 200 {
			n = math.MaxInt // enough: read to the end
		}
		r, err := h.client.Resume(t.Context(), thread, threads.EventID(got[len(got)-1]))
		require.NoError(t, err)
		ended = read(r, n)
		r.Close()
	}
	require.Greater(t, resumes, 200, "the reply (1,000 words) outlasts 200 resumes of at most 4 events")
	want := readAll(t, whole)
	checkIDs(t, got)
	require.Equal(t, want, got)
	var text strings.Builder
	for _, e := range got {
		if string(e.Type) == threads.EventAgentText {
			text.WriteString(e.AgentTextSSE.Data.Chunk)
		}
	}
	var words strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&words, "w%d ", i)
	}
	assert.Equal(t, words.String(), text.String())
}
