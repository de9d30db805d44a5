package loom_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/generated/loomapi"
)

// A react run streams the documented events with the full envelope, as
// the original server sent them: no run_start; session_id (the thread);
// node_id on every event, run-<node>-<n> from each node_enter; event_id
// from 1 and +1 per frame; run_end takes the next event_id and carries
// the reply, the last call's usage and the run's; checkpoint_ns is left
// out.
func TestRunStreamsEventsWithEnvelope(t *testing.T) {
	h := start(t, testConfig(t))
	c := h.dial()
	res := c.run(runReq("run-1", "react", "echo hello there"))
	require.NotNil(t, res.end, "the run ends with run_end, not %+v", res.err)
	assert.Equal(t, "run-1", res.id, "the request's id is the run id")

	tt := types(res.events)
	assert.Equal(t, "node_enter", tt[0], "no run_start by default")
	body := tt[1 : len(tt)-5]
	for _, typ := range body {
		assert.Equal(t, "message_chunk", typ)
	}
	assert.Equal(t, []string{"usage", "node_exit", "updates", "values", "checkpoint"}, tt[len(tt)-5:])
	assert.Equal(t, "You said: echo hello there", chunks(res.events))
	assert.Greater(t, len(body), 1, "the reply streams in several chunks")

	session := *envelopeOf(t, res.events[0]).SessionID
	assert.True(t, strings.HasPrefix(session, "run-"), session)
	assert.NotEqual(t, "run-1", session, "a client-chosen id does not name the new thread")
	for i, e := range res.events {
		env := envelopeOf(t, e)
		require.NotNil(t, env.EventID, env.Type)
		assert.Equal(t, i+1, *env.EventID, "event_id counts the frames of the run from 1")
		assert.Equal(t, session, *env.SessionID)
		require.NotNil(t, env.NodeID, env.Type)
		assert.Equal(t, "run-think-1", *env.NodeID, env.Type)
	}
	assert.Equal(t, len(res.events)+1, *res.end.EventID, "run_end takes the next event_id")
	assert.Equal(t, session, *res.end.SessionID)
	assert.Equal(t, "run-think-1", *res.end.NodeID)
	assert.Equal(t, "You said: echo hello there", res.end.Reply)
	want := &loomapi.TokenUsage{PromptTokens: 100, CompletionTokens: 62, TotalTokens: 162}
	assert.Equal(t, want, res.end.Usage)
	assert.Equal(t, want, res.end.TotalUsage)
	u := res.events[len(tt)-5].(loomapi.UsageEvent)
	assert.Equal(t, []int{100, 62, 162}, []int{u.PromptTokens, u.CompletionTokens, u.TotalTokens})
	exit := res.events[len(tt)-4].(loomapi.NodeExitEvent)
	assert.JSONEq(t, `"Ok"`, string(exit.Result))
	assert.Equal(t, "think", exit.ID)
	upd := res.events[len(tt)-3].(loomapi.UpdatesEvent)
	assert.JSONEq(t, `{"messages":[{"role":"assistant","content":"You said: echo hello there"}],"turns":1}`, string(upd.State))
	vals := res.events[len(tt)-2].(loomapi.ValuesEvent)
	assert.JSONEq(t, `{"messages":[{"role":"user","content":"echo hello there"},{"role":"assistant","content":"You said: echo hello there"}],"turns":1}`, string(vals.State))
	cp := res.events[len(tt)-1].(loomapi.CheckpointEvent)
	assert.Equal(t, 1, cp.Step)
	assert.Equal(t, session, cp.ThreadID)
	assert.Nil(t, cp.CheckpointNs, "checkpoint_ns is left out, not empty")
	assert.JSONEq(t, string(vals.State), string(cp.State))
	assert.NotEmpty(t, cp.CheckpointID)

	// A run without an id gets one made up, which names its new thread:
	// session_id is the run id, as the original server sent, and
	// event_id starts again at 1.
	res = c.run(runReq("", "react", "echo again"))
	require.NotNil(t, res.end)
	assert.True(t, strings.HasPrefix(res.id, "run-"), res.id)
	assert.Equal(t, 1, *envelopeOf(t, res.events[0]).EventID)
	assert.Equal(t, res.id, *envelopeOf(t, res.events[0]).SessionID, "session_id is the run id")
	assert.Equal(t, res.id, *res.end.SessionID)
	assert.NotEqual(t, session, res.id, "each run without thread_id is a new thread")

	// That session_id continues the thread.
	next := runReq("", "react", "echo three")
	next.ThreadID = &res.id
	more := c.run(next)
	require.NotNil(t, more.end)
	assert.Equal(t, res.id, *more.end.SessionID)
	hist := c.messages("m", res.id, nil, nil)
	assert.Equal(t, []string{"echo again", "You said: echo again", "echo three", "You said: echo three"}, contents(hist),
		"both runs are on the thread named by the first one's id")
}

// --loom-run-start sends the document's run_start before the first
// node_enter, with the envelope of the events before any node (node_id
// run-0).
func TestRunStartOption(t *testing.T) {
	h := start(t, testConfig(t, "--loom-run-start"))
	c := h.dial()
	res := c.run(runReq("", "react", "echo hello"))
	require.NotNil(t, res.end, "%+v", res.err)
	tt := types(res.events)
	require.Equal(t, "run_start", tt[0])
	assert.Equal(t, "node_enter", tt[1])
	rs := res.events[0].(loomapi.RunStartEvent)
	assert.Equal(t, res.id, *rs.RunID)
	assert.Equal(t, "echo hello", *rs.Message)
	assert.Equal(t, "react", *rs.Agent)
	assert.Equal(t, res.id, *rs.SessionID)
	assert.Equal(t, "run-0", *rs.NodeID)
	assert.Equal(t, 1, *rs.EventID)
	assert.Equal(t, "run-think-1", *envelopeOf(t, res.events[1]).NodeID)
}

// A run with reasoning and a tool call: thought_chunk, the tool events
// in the documented order (tool_call_chunk → tool_call → tool_start →
// tool_output → tool_end), a node_id per node run, and run_end with the
// last call's usage and the sum over the run.
func TestToolRunEventOrder(t *testing.T) {
	h := start(t, testConfig(t))
	h.write("notes.txt", "buy milk")
	c := h.dial()
	res := c.run(runReq("r", "react", "look around please"))
	require.NotNil(t, res.end, "%+v", res.err)

	var compact []string
	nodes := map[string]string{}
	for _, e := range res.events {
		typ := envelopeOf(t, e).Type
		if n := len(compact); n > 0 && compact[n-1] == typ && (typ == "message_chunk" || typ == "thought_chunk" || typ == "tool_call_chunk") {
			continue
		}
		compact = append(compact, typ)
		if env := envelopeOf(t, e); env.NodeID != nil {
			nodes[*env.NodeID] = typ
		}
	}
	assert.Equal(t, []string{
		"node_enter", "thought_chunk", "message_chunk", "tool_call_chunk", "tool_call", "usage", "node_exit", "updates", "values", "checkpoint",
		"node_enter", "tool_start", "tool_end", "node_exit", "updates", "values", "checkpoint",
		"node_enter", "message_chunk", "usage", "node_exit", "updates", "values", "checkpoint"}, compact)
	assert.Contains(t, nodes, "run-think-1")
	assert.Contains(t, nodes, "run-act-1")
	assert.Contains(t, nodes, "run-think-2")
	assert.Equal(t, "run-think-2", *res.end.NodeID)

	var call loomapi.ToolCallEvent
	var end loomapi.ToolEndEvent
	var argText strings.Builder
	for _, e := range res.events {
		switch v := e.(type) {
		case loomapi.ToolCallChunkEvent:
			argText.WriteString(v.ArgumentsDelta)
			assert.Equal(t, "read", *v.Name)
		case loomapi.ToolCallEvent:
			call = v
		case loomapi.ToolEndEvent:
			end = v
		case loomapi.ThoughtChunkEvent:
			assert.Equal(t, "think", v.ID)
		}
	}
	assert.JSONEq(t, `{"path":"notes.txt"}`, argText.String())
	assert.Equal(t, "read", call.Name)
	assert.Equal(t, loomapi.ToolCallEventArguments{"path": "notes.txt"}, call.Arguments)
	assert.Equal(t, *call.CallID, *end.CallID)
	assert.Contains(t, end.Result, "buy milk")
	assert.False(t, end.IsError)
	assert.Equal(t, "The notes say: "+end.Result, res.end.Reply)
	assert.Equal(t, &loomapi.TokenUsage{PromptTokens: 200, CompletionTokens: 10, TotalTokens: 210}, res.end.Usage)
	assert.Equal(t, &loomapi.TokenUsage{PromptTokens: 320, CompletionTokens: 40, TotalTokens: 360}, res.end.TotalUsage)
}

// A command's output streams as tool_output between tool_start and
// tool_end.
func TestToolOutputStreams(t *testing.T) {
	h := start(t, testConfig(t, "--approval-policy", "full-auto"))
	c := h.dial()
	res := c.run(runReq("", "react", "say hi"))
	require.NotNil(t, res.end, "%+v", res.err)
	tt := types(res.events)
	s, o, e := indexOf(tt, "tool_start"), indexOf(tt, "tool_output"), indexOf(tt, "tool_end")
	require.True(t, s >= 0 && o > s && e > o, "tool_start < tool_output < tool_end in %v", tt)
	assert.Equal(t, "hi\n", res.events[o].(loomapi.ToolOutputEvent).Content)
	assert.Equal(t, "bash", res.events[o].(loomapi.ToolOutputEvent).Name)
}

func indexOf(ss []string, s string) int {
	for i, v := range ss {
		if v == s {
			return i
		}
	}
	return -1
}

// ping, tools_list and tool_show (yaml by default, or json), over text
// and binary frames.
func TestRequestsAndResponses(t *testing.T) {
	h := start(t, testConfig(t))
	c := h.dial()
	c.ping("p1")
	c.sendRaw(websocket.MessageBinary, `{"type":"ping","id":"p2"}`)
	assert.Equal(t, loomapi.NewPongResponse("p2"), c.next(), "a binary frame is JSON too")

	c.send(loomapi.ToolsListRequest{Type: loomapi.TypeToolsList, ID: "t1"})
	list, ok := c.next().(loomapi.ToolsListResponse)
	require.True(t, ok)
	assert.Equal(t, "t1", list.ID)
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
		assert.NotEmpty(t, tool.InputSchema, tool.Name)
	}
	assert.IsIncreasing(t, names)
	assert.Subset(t, names, []string{"bash", "read", "write_file", "edit", "ls", "glob", "grep"})

	c.send(loomapi.ToolShowRequest{Type: loomapi.TypeToolShow, ID: "s1", Name: "read"})
	show, ok := c.next().(loomapi.ToolShowResponse)
	require.True(t, ok)
	require.NotNil(t, show.ToolYaml, "yaml is the default")
	assert.Nil(t, show.Tool)
	assert.True(t, strings.HasPrefix(*show.ToolYaml, "name: read\n"), *show.ToolYaml)
	assert.Contains(t, *show.ToolYaml, "input_schema:")

	c.send(loomapi.ToolShowRequest{Type: loomapi.TypeToolShow, ID: "s2", Name: "read", Output: new("json")})
	show, ok = c.next().(loomapi.ToolShowResponse)
	require.True(t, ok)
	require.NotNil(t, show.Tool)
	assert.Nil(t, show.ToolYaml)
	assert.Equal(t, "read", show.Tool.Name)
	for _, tool := range list.Tools {
		if tool.Name == "read" {
			assert.Equal(t, tool, *show.Tool, "tool_show shows what tools_list lists")
		}
	}

	c.send(loomapi.ToolShowRequest{Type: loomapi.TypeToolShow, ID: "s3", Name: "nope"})
	id, msg := c.expectError()
	assert.Equal(t, "s3", id)
	assert.Equal(t, "tool not found: nope", msg, "the original server's text")
	c.ping("still open")
}

// Bad frames get one error each and the socket stays open.
func TestParseErrorsKeepTheSocketOpen(t *testing.T) {
	h := start(t, testConfig(t))
	c := h.dial()
	for _, tc := range []struct{ frame, id, msg string }{
		{`{"type":"ping"`, "", ""},
		{`[1,2]`, "", ""},
		{`{"type":"interrupt","id":"x1"}`, "x1", `/type: unknown message type "interrupt"`},
		{`{"type":"run","agent":"react","id":"x2"}`, "x2", "/message: is required"},
		{`{"type":"run","message":"hi","agent":"plan"}`, "", `/agent: must be one of "react", "dup", "tot", "got"`},
		{`{"type":"user_messages","id":"x3"}`, "x3", "/thread_id: is required"},
		{`{"type":"user_messages","id":"x4","thread_id":""}`, "x4", "/thread_id:"},
		{`{"type":"tool_show","id":"x5"}`, "x5", "/name: is required"},
	} {
		c.sendRaw(websocket.MessageText, tc.frame)
		id, msg := c.expectError()
		assert.Equal(t, tc.id, id, tc.frame)
		assert.Contains(t, msg, tc.msg, tc.frame)
		assert.NotEmpty(t, msg, tc.frame)
	}
	// A run whose message is only white space is refused before it runs.
	c.send(runReq("blank", "react", "   "))
	id, msg := c.expectError()
	assert.Equal(t, "blank", id)
	assert.Contains(t, msg, "empty")
	c.ping("open")
}

// A run that fails gets one error with its run id, then the socket is
// closed, as the document says.
func TestRunFailureSendsErrorThenCloses(t *testing.T) {
	h := start(t, testConfig(t))
	c := h.dial()
	res := c.run(runReq("bad", "react", "fail now"))
	require.NotNil(t, res.err, "the run ends with an error")
	assert.Equal(t, "bad", *res.err.ID)
	assert.Contains(t, res.err.Error, "upstream unavailable")
	assert.Nil(t, res.end)
	c.expectClosed(websocket.StatusNormalClosure)
}

// Loom is served at /loom and / of the main listener and at the root of
// its own listener; a plain GET of / on the main listener gets the
// playground page (internal/playground), not Loom.
func TestServedAtLoomRootAndOwnListener(t *testing.T) {
	h := start(t, testConfig(t, "--listen", "loom=127.0.0.1:0"))
	for _, u := range []string{
		"ws://" + h.srv.Addr("main") + "/loom",
		"ws://" + h.srv.Addr("main") + "/",
		"ws://" + h.srv.Addr("loom") + "/",
	} {
		c := dialURL(t, u)
		res := c.run(runReq("", "react", "echo "+u))
		require.NotNil(t, res.end, u)
		assert.Equal(t, "You said: echo "+u, res.end.Reply, u)
		c.close()
	}
	resp, err := httpGet("http://" + h.srv.Addr("main") + "/")
	require.NoError(t, err)
	assert.Equal(t, 200, resp, "the playground")
	resp, err = httpGet("http://" + h.srv.Addr("main") + "/healthz")
	require.NoError(t, err)
	assert.Equal(t, 200, resp)
}

// Fifty sockets run at once, each on its own thread: every socket gets
// its own run's frames and nothing else.
func TestConcurrentRunsDoNotCrossTalk(t *testing.T) {
	h := start(t, testConfig(t))
	const n = 50
	clients := make([]*client, n)
	for i := range clients {
		clients[i] = h.dial()
	}
	for i, c := range clients {
		c.send(runReq(fmt.Sprintf("r%d", i), "react", fmt.Sprintf("echo number %d", i)))
	}
	sessions := map[string]bool{}
	for i, c := range clients {
		res := c.readRun()
		require.NotNil(t, res.end, "run %d: %+v", i, res.err)
		assert.Equal(t, fmt.Sprintf("r%d", i), res.id)
		assert.Equal(t, fmt.Sprintf("You said: echo number %d", i), res.end.Reply)
		assert.Equal(t, res.end.Reply, chunks(res.events))
		assert.Empty(t, res.other)
		session := *res.end.SessionID
		assert.False(t, sessions[session], "each run has its own thread")
		sessions[session] = true
		for j, e := range res.events {
			assert.Equal(t, j+1, *envelopeOf(t, e).EventID)
			assert.Equal(t, session, *envelopeOf(t, e).SessionID)
		}
	}
}

// syncBuffer is a log sink for one test.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// verbose: true logs that run at debug level on a server that logs
// warnings only; other runs log nothing there.
func TestVerboseLogsTheRun(t *testing.T) {
	var logs syncBuffer
	h := startLogging(t, testConfig(t), &logs)
	c := h.dial()
	require.NotNil(t, c.run(runReq("quiet", "react", "echo quietly")).end)
	assert.NotContains(t, logs.String(), "level=DEBUG")
	r := runReq("loud", "react", "echo loudly")
	r.Verbose = new(true)
	require.NotNil(t, c.run(r).end)
	out := logs.String()
	assert.Regexp(t, `level=DEBUG msg="loom: run posted" conn=\w+ protocol=loom run=loud`, out, "the connection's id, then the run's")
	assert.Contains(t, out, "type=run.completed")
	assert.NotContains(t, out, "run=quiet")
}

// Runs sent back to back on one socket run one after the other: all of
// the first run's frames, then the second's, each numbered from 1.
func TestRunsOnOneSocketRunInOrder(t *testing.T) {
	h := start(t, testConfig(t))
	h.write("notes.txt", "buy milk")
	c := h.dial()
	c.send(runReq("first", "react", "look around"))
	c.send(runReq("second", "react", "echo second"))
	c.send(loomapi.PingRequest{Type: loomapi.TypePing, ID: "between"})
	var ends []string
	var pongs int
	for len(ends) < 2 {
		res := c.readRun()
		require.NotNil(t, res.end, "%+v", res.err)
		ends = append(ends, res.id)
		assert.Equal(t, 1, *envelopeOf(t, res.events[0]).EventID)
		for _, o := range res.other {
			if _, ok := o.(loomapi.PongResponse); ok {
				pongs++
			}
		}
	}
	assert.Equal(t, []string{"first", "second"}, ends)
	if pongs == 0 {
		assert.Equal(t, loomapi.NewPongResponse("between"), c.next(), "the ping is answered")
	}
}
