package loom_test

// The original Loom server's end-to-end suite (serve/tests/e2e of the loom
// repository) decodes every frame with the `loom` crate's types, which it
// takes as a git dependency that cannot be fetched here. These tests play
// its scenarios (and the Loom scenarios of this package) against agentwire
// and decode every frame agentwire sends by the rules of those types, as
// serde_json applies them: tagged enums with no catch-all variant, every
// non-Option field required and of its Rust type (u32, u64, usize, i64
// integers without fraction or exponent, in range), Option fields absent or
// null, unknown fields ignored, and the envelope's session_id, node_id and
// event_id taken by the envelope struct before the flattened event sees the
// rest. The types are those of the revision that holds the protocol
// document (b84eedb: loom/src/protocol/mod.rs, stream-event/src/event.rs,
// loom/src/llm LlmUsage, loom/src/tool_source ToolSpec); the checks after
// decoding are those of its e2e tests.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/server/servertest"
)

// rt is a Rust type as serde_json deserializes it.
type rt struct {
	kind   string // string, bool, u32, u64, usize, i64, f32, value, struct, vec, option
	elem   *rt
	fields []rfield
}

type rfield struct {
	name string
	t    *rt
}

var (
	rString = &rt{kind: "string"}
	rBool   = &rt{kind: "bool"}
	rU32    = &rt{kind: "u32"}
	rU64    = &rt{kind: "u64"}
	rUsize  = &rt{kind: "usize"}
	rI64    = &rt{kind: "i64"}
	rF32    = &rt{kind: "f32"}
	rValue  = &rt{kind: "value"}
)

func rOpt(t *rt) *rt { return &rt{kind: "option", elem: t} }
func rVec(t *rt) *rt { return &rt{kind: "vec", elem: t} }

// rStruct takes name, type pairs.
func rStruct(pairs ...any) *rt {
	s := &rt{kind: "struct"}
	for i := 0; i < len(pairs); i += 2 {
		s.fields = append(s.fields, rfield{pairs[i].(string), pairs[i+1].(*rt)})
	}
	return s
}

var (
	rLlmUsage = rStruct("prompt_tokens", rU32, "completion_tokens", rU32, "total_tokens", rU32)
	rToolSpec = rStruct("name", rString, "description", rOpt(rString), "input_schema", rValue)

	// protocolEvents is stream_event::ProtocolEvent, #[serde(tag = "type",
	// rename_all = "snake_case")]: no run_start, no catch-all.
	protocolEvents = map[string]*rt{
		"node_enter":        rStruct("id", rString),
		"node_exit":         rStruct("id", rString, "result", rValue),
		"message_chunk":     rStruct("content", rString, "id", rString),
		"thought_chunk":     rStruct("content", rString, "id", rString),
		"usage":             rStruct("prompt_tokens", rU32, "completion_tokens", rU32, "total_tokens", rU32),
		"values":            rStruct("state", rValue),
		"updates":           rStruct("id", rString, "state", rValue),
		"custom":            rStruct("value", rValue),
		"checkpoint":        rStruct("checkpoint_id", rString, "timestamp", rString, "step", rI64, "state", rValue, "thread_id", rOpt(rString), "checkpoint_ns", rOpt(rString)),
		"tot_expand":        rStruct("candidates", rVec(rString)),
		"tot_evaluate":      rStruct("chosen", rUsize, "scores", rVec(rF32)),
		"tot_backtrack":     rStruct("reason", rString, "to_depth", rU32),
		"got_plan":          rStruct("node_count", rUsize, "edge_count", rUsize, "node_ids", rVec(rString)),
		"got_node_start":    rStruct("id", rString),
		"got_node_complete": rStruct("id", rString, "result_summary", rString),
		"got_node_failed":   rStruct("id", rString, "error", rString),
		"got_expand":        rStruct("node_id", rString, "nodes_added", rUsize, "edges_added", rUsize),
		"tool_call_chunk":   rStruct("call_id", rOpt(rString), "name", rOpt(rString), "arguments_delta", rString),
		"tool_call":         rStruct("call_id", rOpt(rString), "name", rString, "arguments", rValue),
		"tool_start":        rStruct("call_id", rOpt(rString), "name", rString),
		"tool_output":       rStruct("call_id", rOpt(rString), "name", rString, "content", rString),
		"tool_end":          rStruct("call_id", rOpt(rString), "name", rString, "result", rString, "is_error", rBool),
		"tool_approval":     rStruct("call_id", rOpt(rString), "name", rString, "arguments", rValue),
	}

	// serverResponses is loom::ServerResponse, #[serde(tag = "type",
	// rename_all = "snake_case")]; run_stream_event is checked apart.
	serverResponses = map[string]*rt{
		"run_end": rStruct("id", rString, "reply", rString, "reasoning_content", rOpt(rString), "usage", rOpt(rLlmUsage),
			"total_usage", rOpt(rLlmUsage), "session_id", rOpt(rString), "node_id", rOpt(rString), "event_id", rOpt(rU64)),
		"tools_list":    rStruct("id", rString, "tools", rVec(rToolSpec)),
		"tool_show":     rStruct("id", rString, "tool", rOpt(rValue), "tool_yaml", rOpt(rString)),
		"user_messages": rStruct("id", rString, "thread_id", rString, "messages", rVec(rStruct("role", rString, "content", rString)), "has_more", rOpt(rBool)),
		"pong":          rStruct("id", rString),
		"error":         rStruct("id", rOpt(rString), "error", rString),
	}

	// envelopeFields are ProtocolEventEnvelope's own fields, beside the
	// #[serde(flatten)] event: they take their keys first.
	envelopeFields = rStruct("session_id", rOpt(rString), "node_id", rOpt(rString), "event_id", rOpt(rU64))
)

// decodeAs checks v (decoded with UseNumber) against t.
func decodeAs(v any, t *rt, path string) error {
	switch t.kind {
	case "option":
		if v == nil {
			return nil
		}
		return decodeAs(v, t.elem, path)
	case "value":
		return nil
	case "string":
		if _, ok := v.(string); !ok {
			return fmt.Errorf("%s: invalid type %T, expected a string", path, v)
		}
	case "bool":
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("%s: invalid type %T, expected a boolean", path, v)
		}
	case "f32":
		if _, ok := v.(json.Number); !ok {
			return fmt.Errorf("%s: invalid type %T, expected f32", path, v)
		}
	case "u32", "u64", "usize", "i64":
		n, ok := v.(json.Number)
		if !ok {
			return fmt.Errorf("%s: invalid type %T, expected %s", path, v, t.kind)
		}
		if strings.ContainsAny(n.String(), ".eE") {
			return fmt.Errorf("%s: invalid type: floating point %s, expected %s", path, n, t.kind)
		}
		i, err := n.Int64()
		if t.kind != "i64" && (err != nil || i < 0 || t.kind == "u32" && i > math.MaxUint32) {
			return fmt.Errorf("%s: invalid value %s, expected %s", path, n, t.kind)
		}
		if t.kind == "i64" && err != nil {
			return fmt.Errorf("%s: invalid value %s, expected i64", path, n)
		}
	case "vec":
		a, ok := v.([]any)
		if !ok {
			return fmt.Errorf("%s: invalid type %T, expected a sequence", path, v)
		}
		for i, e := range a {
			if err := decodeAs(e, t.elem, fmt.Sprintf("%s/%d", path, i)); err != nil {
				return err
			}
		}
	case "struct":
		m, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: invalid type %T, expected a map", path, v)
		}
		for _, f := range t.fields {
			fv, present := m[f.name]
			if !present {
				if f.t.kind == "option" {
					continue
				}
				return fmt.Errorf("%s: missing field `%s`", path, f.name)
			}
			if err := decodeAs(fv, f.t, path+"/"+f.name); err != nil {
				return err
			}
		}
	default:
		panic(t.kind)
	}
	return nil
}

// decodeTagged checks an internally tagged enum: its "type" names one of
// variants, whose fields m must then hold.
func decodeTagged(m map[string]any, variants map[string]*rt, path string) (string, error) {
	tag, ok := m["type"].(string)
	if !ok {
		return "", fmt.Errorf("%s: missing field `type`", path)
	}
	t, ok := variants[tag]
	if !ok {
		return tag, fmt.Errorf("%s: unknown variant `%s`", path, tag)
	}
	return tag, decodeAs(m, t, path)
}

// serverResponse is a frame as the original client decodes it.
type serverResponse struct {
	Type  string
	Raw   string
	Body  map[string]any // the frame
	Event map[string]any // run_stream_event: the event with the envelope fields
	Kind  string         // run_stream_event: the event's type
}

// decodeServerResponse decodes a frame as loom::ServerResponse.
func decodeServerResponse(b []byte) (serverResponse, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return serverResponse{}, err
	}
	r := serverResponse{Raw: string(b), Body: m}
	if m["type"] != "run_stream_event" {
		tag, err := decodeTagged(m, serverResponses, "")
		r.Type = tag
		return r, err
	}
	r.Type = "run_stream_event"
	if err := decodeAs(m, rStruct("id", rString), ""); err != nil {
		return r, err
	}
	ev, ok := m["event"].(map[string]any)
	if !ok {
		return r, fmt.Errorf("/event: missing or not a map")
	}
	r.Event = ev
	if err := decodeAs(ev, envelopeFields, "/event"); err != nil {
		return r, err
	}
	rest := map[string]any{}
	for k, v := range ev {
		if !slices.ContainsFunc(envelopeFields.fields, func(f rfield) bool { return f.name == k }) {
			rest[k] = v
		}
	}
	tag, err := decodeTagged(rest, protocolEvents, "/event")
	r.Kind = tag
	return r, err
}

// rawClient is a Loom socket whose frames are decoded as the original
// client decodes them.
type rawClient struct {
	t  *testing.T
	ws *websocket.Conn
	// undecodable counts, by event type, the frames the original client
	// could not decode.
	undecodable map[string]int
	lenient     map[string]bool // event types expected to be undecodable
}

func dialRaw(t *testing.T, h *harness) *rawClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), frameTimeout)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws://"+h.srv.Addr("main")+"/", nil)
	require.NoError(t, err)
	ws.SetReadLimit(16 << 20)
	t.Cleanup(func() { _ = ws.CloseNow() })
	return &rawClient{t: t, ws: ws, undecodable: map[string]int{}, lenient: map[string]bool{}}
}

func (c *rawClient) send(frame string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), frameTimeout)
	defer cancel()
	require.NoError(c.t, c.ws.Write(ctx, websocket.MessageText, []byte(frame)))
}

// next reads a frame and decodes it; a frame the client cannot decode
// fails the test unless its event type is lenient.
func (c *rawClient) next() serverResponse {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), frameTimeout)
	defer cancel()
	_, b, err := c.ws.Read(ctx)
	require.NoError(c.t, err)
	r, err := decodeServerResponse(b)
	if err != nil && r.Kind != "" && c.lenient[r.Kind] {
		c.undecodable[r.Kind]++
		return r
	}
	require.NoError(c.t, err, "the original client cannot decode %s", b)
	return r
}

// rawRun is what one run sent, in order.
type rawRun struct {
	events []serverResponse
	end    serverResponse // run_end or error
}

// run sends a run request and reads to its run_end or error, checking
// what send_run_and_recv_end and e2e_run_react check of every frame (the
// session_id only when the request names no thread: the original server
// sent the run id, which is then the thread's id).
func (c *rawClient) run(frame string) rawRun {
	c.t.Helper()
	c.send(frame)
	var res rawRun
	runID := ""
	last := uint64(0)
	ownThread := !strings.Contains(frame, `"thread_id"`)
	for {
		r := c.next()
		id, _ := r.Body["id"].(string)
		if runID == "" {
			runID = id
		}
		switch r.Type {
		case "run_stream_event":
			require.Equal(c.t, runID, id)
			res.events = append(res.events, r)
			if ownThread {
				assert.Equal(c.t, runID, r.Event["session_id"], "session_id is the run id: %s", r.Raw)
			}
			nodeID, _ := r.Event["node_id"].(string)
			assert.NotEmpty(c.t, strings.TrimSpace(nodeID), "stream event should include node_id: %s", r.Raw)
			n, err := r.Event["event_id"].(json.Number).Int64()
			require.NoError(c.t, err)
			assert.Equal(c.t, last+1, uint64(n), "event_id increases by 1 from 1: %s", r.Raw)
			last = uint64(n)
			if !c.lenient[r.Kind] {
				checkEvent(c.t, r)
			}
		case "run_end":
			require.Equal(c.t, runID, id)
			assert.True(c.t, strings.HasPrefix(id, "run-"), "server-generated run id: %s", id)
			if s, ok := r.Body["session_id"]; ok && ownThread {
				assert.Equal(c.t, runID, s)
			}
			if n, ok := r.Body["event_id"].(json.Number); ok {
				i, _ := n.Int64()
				assert.Equal(c.t, last+1, uint64(i), "run_end event_id is next after the last event")
			}
			res.end = r
			return res
		case "error":
			res.end = r
			return res
		}
	}
}

// checkEvent is e2e_run_react's assert_protocol_event.
func checkEvent(t *testing.T, r serverResponse) {
	t.Helper()
	e := r.Event
	nonEmpty := func(field string) {
		s, _ := e[field].(string)
		assert.NotEmpty(t, strings.TrimSpace(s), "expected non-empty %s: %s", field, r.Raw)
	}
	optNonEmpty := func(field string) {
		if s, ok := e[field].(string); ok {
			assert.NotEmpty(t, strings.TrimSpace(s), "expected non-empty %s: %s", field, r.Raw)
		}
	}
	num := func(field string) int64 {
		n, _ := e[field].(json.Number).Int64()
		return n
	}
	switch r.Kind {
	case "node_enter", "got_node_start":
		nonEmpty("id")
	case "node_exit":
		nonEmpty("id")
		assert.NotNil(t, e["result"])
	case "message_chunk", "thought_chunk":
		nonEmpty("id")
		assert.NotEmpty(t, e["content"])
	case "usage":
		assert.Equal(t, num("total_tokens"), num("prompt_tokens")+num("completion_tokens"), r.Raw)
	case "values":
		assert.NotNil(t, e["state"], r.Raw)
	case "custom":
		assert.NotNil(t, e["value"], r.Raw)
	case "updates":
		nonEmpty("id")
		assert.NotNil(t, e["state"])
	case "checkpoint":
		nonEmpty("checkpoint_id")
		nonEmpty("timestamp")
		assert.GreaterOrEqual(t, num("step"), int64(0))
		assert.NotNil(t, e["state"])
		optNonEmpty("thread_id")
		optNonEmpty("checkpoint_ns")
	case "tot_expand":
		c, _ := e["candidates"].([]any)
		assert.NotEmpty(t, c, r.Raw)
	case "tot_evaluate":
		s, _ := e["scores"].([]any)
		assert.NotEmpty(t, s, r.Raw)
		assert.Less(t, num("chosen"), int64(len(s)), r.Raw)
	case "tot_backtrack":
		nonEmpty("reason")
	case "got_plan":
		ids, _ := e["node_ids"].([]any)
		assert.Equal(t, int64(len(ids)), num("node_count"))
	case "got_node_complete":
		nonEmpty("id")
		nonEmpty("result_summary")
	case "got_node_failed":
		nonEmpty("id")
		nonEmpty("error")
	case "tool_call_chunk":
		optNonEmpty("call_id")
		optNonEmpty("name")
	case "tool_call":
		optNonEmpty("call_id")
		nonEmpty("name")
		_, isObject := e["arguments"].(map[string]any)
		assert.True(t, isObject, r.Raw)
	case "tool_start", "tool_output":
		optNonEmpty("call_id")
		nonEmpty("name")
	case "tool_end":
		optNonEmpty("call_id")
		nonEmpty("name")
		nonEmpty("result")
	}
}

// The original e2e suite against agentwire's default configuration (the
// built-in scenario): every frame decodes with the client's types, and
// each test's checks hold.
func TestOriginalE2ESuite(t *testing.T) {
	h := start(t, servertest.Config(t))
	c := dialRaw(t, h)

	// e2e_ping
	c.send(`{"type":"ping","id":"ping-1"}`)
	r := c.next()
	assert.Equal(t, "pong", r.Type)
	assert.Contains(t, r.Raw, `"id":"ping-1"`)

	// e2e_tools_list
	c.send(`{"type":"tools_list","id":"tools-list-1"}`)
	r = c.next()
	require.Equal(t, "tools_list", r.Type)
	assert.Equal(t, "tools-list-1", r.Body["id"])
	assert.NotEmpty(t, r.Body["tools"])

	// e2e_tool_show_existing
	c.send(`{"type":"tool_show","id":"tool-show-1","name":"read","output":"json"}`)
	r = c.next()
	require.Equal(t, "tool_show", r.Type)
	assert.Contains(t, r.Raw, `"name":"read"`)
	assert.Equal(t, "read", r.Body["tool"].(map[string]any)["name"])

	// e2e_tool_show_nonexistent
	c.send(`{"type":"tool_show","id":"tool-show-err-1","name":"nonexistent_tool_xyz_123"}`)
	r = c.next()
	require.Equal(t, "error", r.Type)
	assert.Equal(t, "tool-show-err-1", r.Body["id"])
	assert.Contains(t, r.Body["error"], "not found")
	assert.Equal(t, "tool not found: nonexistent_tool_xyz_123", r.Body["error"])

	// e2e_invalid_json_returns_error
	c.send("not valid json")
	r = c.next()
	require.Equal(t, "error", r.Type)
	assert.Contains(t, r.Raw, `"type":"error"`)
	assert.True(t, strings.HasPrefix(r.Body["error"].(string), "parse error: "), r.Raw)

	// e2e_run_react (what it sends with id, thread_id, ... left out)
	res := c.run(`{"type":"run","message":"Search the web for recent Rust programming language news and summarize one or two items in a short reply.","agent":"react","verbose":false}`)
	require.Equal(t, "run_end", res.end.Type, res.end.Raw)
	kinds := map[string]bool{}
	for _, e := range res.events {
		kinds[e.Kind] = true
	}
	assert.True(t, kinds["node_enter"] && kinds["node_exit"], "node_enter and node_exit: %v", kinds)
	assert.False(t, kinds["tool_approval"], "no tool_approval in this flow")
	reply := res.end.Body["reply"].(string)
	assert.Contains(t, strings.ToLower(reply), "rust")

	// e2e_user_messages_after_run
	msg := "Say exactly: hello from e2e user_messages test."
	res = c.run(`{"type":"run","message":"` + msg + `","agent":"react","thread_id":"e2e-um-thread-1","verbose":false}`)
	require.Equal(t, "run_end", res.end.Type, res.end.Raw)
	assert.NotEmpty(t, res.end.Body["reply"])
	c.send(`{"type":"user_messages","id":"um-1","thread_id":"e2e-um-thread-1","limit":50}`)
	r = c.next()
	require.Equal(t, "user_messages", r.Type)
	assert.Equal(t, "e2e-um-thread-1", r.Body["thread_id"])
	var user, assistant bool
	for _, m := range r.Body["messages"].([]any) {
		m := m.(map[string]any)
		user = user || m["role"] == "user" && strings.Contains(m["content"].(string), msg)
		assistant = assistant || m["role"] == "assistant"
	}
	assert.True(t, user && assistant, r.Raw)
}

// The Loom scenarios of this package's tests (testdata/server.yaml): every
// strategy, tool events, a question answered, an approval, a model error.
// Every frame decodes with the original client's types, except
// got_expand: its payload field node_id has the envelope's name, which
// the client's envelope struct takes first, so the flattened GotExpand
// misses it. That holds of the original server's frames too (a payload
// field is never overwritten by the envelope), so no server can send a
// got_expand this client decodes; agentwire sends the document's.
func TestOriginalClientDecodesEveryScenario(t *testing.T) {
	h := start(t, testConfig(t))
	h.write("memo.txt", "milk")
	h.write("notes.txt", "buy milk")
	c := dialRaw(t, h)
	c.lenient["got_expand"] = true
	for _, tc := range []struct {
		frame string
		end   string
	}{
		{`{"type":"run","message":"echo hello","agent":"react"}`, "run_end"},
		{`{"type":"run","message":"look around","agent":"react"}`, "run_end"},
		{`{"type":"run","message":"say hi","agent":"react"}`, "run_end"},
		{`{"type":"run","message":"dup the memo","agent":"dup"}`, "run_end"},
		{`{"type":"run","message":"tot the memo","agent":"tot"}`, "run_end"},
		{`{"type":"run","message":"got the memo","agent":"got"}`, "run_end"},
		{`{"type":"run","message":"adapt the memo","agent":"got","got_adaptive":true}`, "run_end"},
		{`{"type":"run","message":"got broken","agent":"got"}`, "run_end"},
	} {
		res := c.run(tc.frame)
		assert.Equal(t, tc.end, res.end.Type, "%s: %s", tc.frame, res.end.Raw)
	}
	assert.Equal(t, map[string]int{"got_expand": 1}, c.undecodable, "only got_expand is undecodable")

	// A question (custom events) answered with input_response, and an
	// approval: tool_approval, which the client decodes.
	c.send(`{"type":"run","message":"ask me","agent":"react","id":"run-ask"}`)
	var request string
	for request == "" {
		r := c.next()
		require.Equal(t, "run_stream_event", r.Type, r.Raw)
		if v, ok := r.Event["value"].(map[string]any); ok && v["kind"] == "input_requested" {
			request = v["request_id"].(string)
		}
	}
	c.send(`{"type":"input_response","id":"run-ask","request_id":"` + request + `","text":"Bob"}`)
	for r := c.next(); r.Type != "run_end"; r = c.next() {
		require.Equal(t, "run_stream_event", r.Type, r.Raw)
	}

	c.send(`{"type":"run","message":"make a file","agent":"react","id":"run-ok"}`)
	var call string
	for call == "" {
		r := c.next()
		require.Equal(t, "run_stream_event", r.Type, r.Raw)
		if r.Kind == "tool_approval" {
			call = r.Event["call_id"].(string)
		}
	}
	c.send(`{"type":"tool_approval_response","id":"run-ok","call_id":"` + call + `","decision":"approve"}`)
	for r := c.next(); r.Type != "run_end"; r = c.next() {
		require.Equal(t, "run_stream_event", r.Type, r.Raw)
	}

	// A run that fails: one error, which the client decodes.
	res := c.run(`{"type":"run","message":"fail now","agent":"react"}`)
	assert.Equal(t, "error", res.end.Type)
	assert.Contains(t, res.end.Body["error"], "upstream unavailable")
}

// The document's run_start (--loom-run-start) is the one frame the
// original client cannot decode: why it is off by default.
func TestOriginalClientRefusesRunStart(t *testing.T) {
	_, err := decodeServerResponse([]byte(`{"type":"run_stream_event","id":"run-1","event":{"type":"run_start","run_id":"run-1","session_id":"run-1","node_id":"run-0","event_id":1}}`))
	assert.ErrorContains(t, err, "unknown variant `run_start`")
	_, err = decodeServerResponse([]byte(`{"type":"run_stream_event","id":"run-1","event":{"type":"checkpoint","checkpoint_id":"c","timestamp":"t","step":1.0,"state":{}}}`))
	assert.ErrorContains(t, err, "floating point", "the decoder refuses what serde refuses")
	_, err = decodeServerResponse([]byte(`{"type":"run_stream_event","id":"run-1","event":{"type":"got_expand","node_id":"n","nodes_added":1,"edges_added":0}}`))
	assert.ErrorContains(t, err, "missing field `node_id`")
}
