package agentloop_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/generated/agentloopapi"
)

// A turn streams the document's sequence: loading_state true, complete
// items, loading_state false, agent_finished, then context_info; the
// first frame of the connection names its new thread.
func TestTurn(t *testing.T) {
	h := start(t, testConfig(t))
	c := h.dial("")

	c.say("echo hello there")
	frames := c.turn()
	assert.Equal(t, []string{"loading_state/true", "message/assistant", "loading_state/false", "agent_finished", "context_info"}, kinds(frames))
	assert.Equal(t, "You said: echo hello there", messageText(items(frames)[0]))
	finished := frames[3].(agentloopapi.AgentFinishedMessage)
	assert.NotEmpty(t, finished.Payload.ResponseID)
	info := frames[4].(agentloopapi.ContextInfoMessage).Payload
	assert.Nil(t, info.ThreadID, "only the first context_info names the thread")
	assert.Equal(t, 2, info.TranscriptLength, "the user's message and the reply")
	assert.Positive(t, info.TokenCount)
	assert.Equal(t, "ThresholdContextManager", info.Strategy)
	assert.Positive(t, info.MaxTokens)

	// A second turn gets its own response id.
	c.say("echo again")
	frames = c.turn()
	assert.NotEqual(t, finished.Payload.ResponseID, frames[3].(agentloopapi.AgentFinishedMessage).Payload.ResponseID)
}

// Reasoning, shell commands and other tools show as their own items; a
// read-only command runs without asking, and its output carries the exit
// code and duration.
func TestResponseItems(t *testing.T) {
	h := start(t, testConfig(t))
	h.write("notes.txt", "one\ntwo\n")
	c := h.dial("")

	c.say("look around")
	frames := c.turn()
	// A command and a read run one after the other: each call's item is
	// followed by its output.
	assert.Equal(t, []string{
		"loading_state/true", "reasoning", "message/assistant",
		"local_shell_call", "local_shell_call_output", "function_call/read", "function_call_output",
		"message/assistant", "loading_state/false", "agent_finished", "context_info",
	}, kinds(frames))
	its := items(frames)
	r := its[0].(agentloopapi.ReasoningItem)
	assert.Equal(t, "I should look at the folder first.", r.Content[0].Text)
	assert.Equal(t, "input_text", r.Content[0].Type)
	if r.DurationMS != nil { // the scripted model reasons in no time
		assert.Positive(t, *r.DurationMS)
	}

	shell := its[2].(agentloopapi.LocalShellCallItem)
	assert.Equal(t, []string{"ls", "-1"}, shell.Action.Command)
	assert.Equal(t, "completed", shell.Status)
	require.NotNil(t, shell.CallID)
	read := its[4].(agentloopapi.FunctionCallItem)
	assert.Equal(t, read.ID, read.CallID)
	assert.JSONEq(t, `{"path":"notes.txt"}`, read.Arguments)

	for _, it := range []agentloopapi.ResponseItemValue{its[3], its[5]} {
		switch v := it.(type) {
		case agentloopapi.LocalShellCallOutputItem:
			assert.Equal(t, *shell.CallID, *v.CallID)
			o := decodeOutput(t, v.Output)
			assert.Contains(t, o.Output, "notes.txt")
			assert.Equal(t, 0, *o.Metadata.ExitCode)
			assert.GreaterOrEqual(t, *o.Metadata.DurationSeconds, 0.0)
		case agentloopapi.FunctionCallOutputItem:
			assert.Equal(t, read.CallID, v.CallID)
			o := decodeOutput(t, v.Output)
			assert.Equal(t, "one\ntwo\n", o.Output)
			assert.Equal(t, 0, *o.Metadata.ExitCode)
		default:
			t.Errorf("item %T where a call's output belongs", it)
		}
	}

	// A failing command reports its own exit status.
	c.say("run a failing command")
	frames = c.turn()
	var out output
	for _, it := range items(frames) {
		if v, ok := it.(agentloopapi.LocalShellCallOutputItem); ok {
			out = decodeOutput(t, v.Output)
		}
	}
	require.NotNil(t, out.Metadata.ExitCode)
	assert.NotZero(t, *out.Metadata.ExitCode)
	assert.Equal(t, "It failed.", messageText(items(frames)[len(items(frames))-1]))

	// Pipelines and && chains of read-only commands run without asking.
	c.say("count lines")
	frames = c.turn()
	assert.NotContains(t, kinds(frames), "approval_request")
	assert.Contains(t, kinds(frames), "local_shell_call_output")
}

// Frames the server cannot act on are answered with an error frame naming
// the problem; the socket stays open and usable.
func TestErrors(t *testing.T) {
	h := start(t, testConfig(t))
	c := h.dial("")
	for _, tc := range []struct {
		name, frame string
		want        string
		code        string
		path        string
	}{
		{"unknown type", `{"id":"1","type":"shutdown"}`, "Unknown message type: shutdown", "unknown_type", ""},
		{"invalid JSON", `{"id":"1","type":`, "Invalid JSON", "invalid", ""},
		{"missing payload", `{"id":"1","type":"user_input"}`, "Invalid message: /payload: is required", "invalid", "/payload"},
		{"empty input", `{"id":"1","type":"user_input","payload":{"input":[]}}`, "Invalid message: /payload/input", "invalid", "/payload/input"},
		{"bad review", `{"id":"1","type":"approval_response","payload":{"review":"maybe"}}`, "Invalid message: /payload/review", "invalid", "/payload/review"},
		{"image content", `{"id":"1","type":"user_input","payload":{"input":[{"type":"message","role":"user","content":[{"type":"input_image","text":""}]}]}}`,
			`Unsupported content type "input_image"`, "invalid", "/payload/input/0/content/0/type"},
		{"non-message item", `{"id":"1","type":"user_input","payload":{"input":[{"type":"function_call_output","role":"user","content":[]}]}}`,
			`Unsupported input item type "function_call_output"`, "invalid", "/payload/input/0/type"},
		{"image after text, the issue's frame", `{"id":"1","type":"user_input","payload":{"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"look"},{"type":"input_image","image_url":"https://example.com/a.png"}]}]}}`,
			`Unsupported content type "input_image"`, "invalid", "/payload/input/0/content/1/type"},
		{"output item without role or content", `{"id":"1","type":"user_input","payload":{"input":[{"type":"function_call_output","call_id":"c1","output":"done"}]}}`,
			`Unsupported input item type "function_call_output"`, "invalid", "/payload/input/0/type"},
		{"message without role", `{"id":"1","type":"user_input","payload":{"input":[{"content":"hi"}]}}`,
			"Invalid message: /payload/input/0/role: is required", "invalid", "/payload/input/0/role"},
		{"message without content", `{"id":"1","type":"user_input","payload":{"input":[{"type":"message","role":"user"}]}}`,
			"Invalid message: /payload/input/0/content: is required", "invalid", "/payload/input/0/content"},
		{"content neither string nor array", `{"id":"1","type":"user_input","payload":{"input":[{"role":"user","content":7}]}}`,
			"Invalid message: /payload/input/0/content: must be a string or an array of content parts", "invalid", "/payload/input/0/content"},
		{"text part without text", `{"id":"1","type":"user_input","payload":{"input":[{"role":"user","content":[{"type":"input_text"}]}]}}`,
			"Invalid message: /payload/input/0/content/0/text: is required", "invalid", "/payload/input/0/content/0/text"},
		{"part without type", `{"id":"1","type":"user_input","payload":{"input":[{"role":"user","content":[{"text":"hi"}]}]}}`,
			"Invalid message: /payload/input/0/content/0/type: is required", "invalid", "/payload/input/0/content/0/type"},
		{"no user text", `{"id":"1","type":"user_input","payload":{"input":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"hi"}]}]}}`,
			"The input has no user text", "invalid", "/payload/input"},
		{"no pending approval", `{"id":"1","type":"approval_response","payload":{"review":"yes","customDenyMessage":null}}`,
			"No approval request is pending", "unknown_request", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.sendRaw(tc.frame)
			msg, details := c.expectError()
			assert.True(t, strings.HasPrefix(msg, tc.want), "error %q, want it to start with %q", msg, tc.want)
			assert.Equal(t, tc.code, details["code"])
			if tc.path != "" {
				assert.Equal(t, tc.path, details["path"])
			}
		})
	}
	// Nothing ran, and the socket still works.
	c.say("echo still here")
	frames := c.turn()
	assert.Equal(t, "You said: echo still here", messageText(items(frames)[0]))
	assert.Equal(t, 2, frames[len(frames)-1].(agentloopapi.ContextInfoMessage).Payload.TranscriptLength, "the refused input left no trace")
}

// user_input takes OpenAI's ResponseInputItem as the document says: the
// short form (string content, no type), a developer item beside the
// user's, and content arrays; each runs on the user's text.
func TestInputForms(t *testing.T) {
	h := start(t, testConfig(t))
	c := h.dial("")
	for _, tc := range []struct{ name, input, reply string }{
		{"short form", `[{"role":"user","content":"echo short"}]`, "You said: echo short"},
		{"short form with type", `[{"type":"message","role":"user","content":"echo typed"}]`, "You said: echo typed"},
		{"developer item", `[{"role":"developer","content":"Be brief."},{"role":"user","content":"echo dev"}]`, "You said: echo dev"},
		{"parts without item type", `[{"role":"user","content":[{"type":"input_text","text":"echo parts"}]}]`, "You said: echo parts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.sendRaw(`{"id":"in-` + tc.name + `","type":"user_input","payload":{"input":` + tc.input + `}}`)
			assert.Equal(t, tc.reply, messageText(items(c.turn())[0]))
		})
	}
}

// A model failure shows as the document's error scenario: a system
// message, an error frame, loading_state false.
func TestModelError(t *testing.T) {
	h := start(t, testConfig(t))
	c := h.dial("")
	c.say("fail now")
	frames := until[agentloopapi.LoadingStateMessage](c) // true
	frames = append(frames, until[agentloopapi.LoadingStateMessage](c)...)
	assert.Equal(t, []string{"loading_state/true", "message/system", "error", "loading_state/false"}, kinds(frames))
	assert.Contains(t, messageText(items(frames)[0]), "⚠️")
	assert.Contains(t, messageText(items(frames)[0]), "upstream unavailable")
	e := frames[2].(agentloopapi.ErrorMessage)
	assert.Contains(t, e.Payload.Message, "upstream unavailable")
	var details map[string]any
	require.NoError(t, json.Unmarshal(e.Payload.Details, &details))
	assert.Equal(t, "model_error", details["code"])

	c.say("echo after the failure")
	assert.Equal(t, "You said: echo after the failure", messageText(items(c.turn())[0]))
}
