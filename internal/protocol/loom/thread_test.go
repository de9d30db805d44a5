package loom_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/generated/agentloopapi"
	"github.com/agentwire/agentwire/generated/loomapi"
)

func (c *client) messages(id, thread string, before, limit *int) loomapi.UserMessagesResponse {
	c.t.Helper()
	c.send(loomapi.UserMessagesRequest{Type: loomapi.TypeUserMessages, ID: id, ThreadID: thread, Before: before, Limit: limit})
	m := c.next()
	page, ok := m.(loomapi.UserMessagesResponse)
	require.True(c.t, ok, "want user_messages, got %+v", m)
	assert.Equal(c.t, id, page.ID)
	require.NotNil(c.t, page.HasMore, "has_more is always sent")
	return page
}

func contents(page loomapi.UserMessagesResponse) []string {
	out := make([]string, len(page.Messages))
	for i, m := range page.Messages {
		out[i] = m.Content
	}
	return out
}

// user_messages pages back from the newest messages, oldest first in each
// page, by seq; has_more is true exactly while older ones remain.
func TestUserMessagesPaging(t *testing.T) {
	h := start(t, testConfig(t))
	c := h.dial()
	thread := "paging-" + uuid.NewString()
	for _, word := range []string{"one", "two", "three"} {
		r := runReq("", "react", "echo "+word)
		r.ThreadID = &thread
		require.NotNil(t, c.run(r).end)
	}

	all := c.messages("all", thread, nil, nil)
	assert.Equal(t, []string{"echo one", "You said: echo one", "echo two", "You said: echo two", "echo three", "You said: echo three"}, contents(all))
	assert.False(t, *all.HasMore)
	assert.Equal(t, thread, all.ThreadID)
	for i, m := range all.Messages {
		require.NotNil(t, m.Seq)
		if i > 0 {
			assert.Greater(t, *m.Seq, *all.Messages[i-1].Seq)
		}
		assert.Equal(t, []string{"user", "assistant"}[i%2], m.Role)
	}

	p1 := c.messages("p1", thread, nil, new(2))
	assert.Equal(t, []string{"echo three", "You said: echo three"}, contents(p1))
	assert.True(t, *p1.HasMore)
	p2 := c.messages("p2", thread, p1.Messages[0].Seq, new(2))
	assert.Equal(t, []string{"echo two", "You said: echo two"}, contents(p2))
	assert.True(t, *p2.HasMore)
	p3 := c.messages("p3", thread, p2.Messages[0].Seq, new(5000))
	assert.Equal(t, []string{"echo one", "You said: echo one"}, contents(p3), "a limit above 1000 is clamped, not refused")
	assert.False(t, *p3.HasMore)
	p4 := c.messages("p4", thread, p3.Messages[0].Seq, nil)
	assert.Empty(t, p4.Messages)
	assert.NotNil(t, p4.Messages, "an empty page is an empty list")
	assert.False(t, *p4.HasMore)
	exact := c.messages("p5", thread, nil, new(6))
	assert.Len(t, exact.Messages, 6)
	assert.False(t, *exact.HasMore, "has_more is false when the page holds the oldest message")

	unknown := c.messages("u", "never-used-"+uuid.NewString(), nil, nil)
	assert.Empty(t, unknown.Messages)
	assert.False(t, *unknown.HasMore)
}

// A Loom run continues a thread started over AgentLoop, named in any case
// of its UUID; AgentLoop then sees the Loom turn in its replay.
func TestCrossProtocolThread(t *testing.T) {
	h := start(t, testConfig(t))
	ctx, cancel := context.WithTimeout(context.Background(), frameTimeout)
	defer cancel()
	al, _, err := websocket.Dial(ctx, "ws://"+h.srv.Addr("main")+"/agentloop", nil)
	require.NoError(t, err)
	defer al.CloseNow()
	readAL := func() agentloopapi.Outbound {
		_, b, err := al.Read(ctx)
		require.NoError(t, err)
		m, err := agentloopapi.DecodeOutbound(b)
		require.NoError(t, err)
		return m
	}
	first := readAL().(agentloopapi.ContextInfoMessage)
	thread := *first.Payload.ThreadID
	in, err := json.Marshal(agentloopapi.UserInputMessage{ID: uuid.NewString(), Type: agentloopapi.TypeUserInput,
		Payload: agentloopapi.UserInputMessagePayload{Input: []agentloopapi.ResponseInputItem{{
			Type: new("message"), Role: new("user"), Content: json.RawMessage(`[{"type":"input_text","text":"echo from agentloop"}]`)}}}})
	require.NoError(t, err)
	require.NoError(t, al.Write(ctx, websocket.MessageText, in))
	for {
		if _, ok := readAL().(agentloopapi.AgentFinishedMessage); ok {
			break
		}
	}

	c := h.dial()
	r := runReq("", "react", "echo from loom")
	r.ThreadID = new(strings.ToUpper(thread))
	res := c.run(r)
	require.NotNil(t, res.end, "%+v", res.err)
	assert.Equal(t, thread, *res.end.SessionID, "a UUID names the same thread in any case")
	page := c.messages("m", thread, nil, nil)
	assert.Equal(t, []string{"echo from agentloop", "You said: echo from agentloop", "echo from loom", "You said: echo from loom"}, contents(page))

	// The AgentLoop socket follows the thread live: the Loom turn reaches it.
	var texts []string
	for {
		m := readAL()
		if it, ok := m.(agentloopapi.ResponseItemMessage); ok {
			if msg, ok := it.Payload.Value.(agentloopapi.MessageItem); ok {
				texts = append(texts, msg.Content[0].Text)
			}
		}
		if _, ok := m.(agentloopapi.AgentFinishedMessage); ok {
			break
		}
	}
	assert.Equal(t, []string{"echo from loom", "You said: echo from loom"}, texts)
}

// working_folder is resolved inside --workdir: a relative folder or an
// absolute one inside it works and confines the tools; anything else is
// refused with an error before anything runs, and the socket stays open.
func TestWorkingFolder(t *testing.T) {
	h := start(t, testConfig(t))
	h.write("notes.txt", "top-level notes")
	h.write("sub/notes.txt", "notes of sub")
	c := h.dial()
	for _, folder := range []string{"sub", filepath.Join(h.cfg.Workdir, "sub")} {
		r := runReq("", "react", "look around please")
		r.WorkingFolder = &folder
		res := c.run(r)
		require.NotNil(t, res.end, "%s: %+v", folder, res.err)
		assert.Contains(t, res.end.Reply, "notes of sub", folder)
	}
	for _, folder := range []string{"../elsewhere", "/etc", "sub/../../x"} {
		r := runReq("wf", "react", "look around please")
		r.WorkingFolder = &folder
		c.send(r)
		id, msg := c.expectError()
		assert.Equal(t, "wf", id)
		assert.Contains(t, msg, "outside the server's working folder", folder)
		c.ping("open")
	}
	r := runReq("wf2", "react", "look around please")
	r.WorkingFolder = new("missing")
	c.send(r)
	id, msg := c.expectError()
	assert.Equal(t, "wf2", id)
	assert.Contains(t, msg, "missing")

	c.send(loomapi.ToolsListRequest{Type: loomapi.TypeToolsList, ID: "tl", WorkingFolder: new("../x")})
	id, msg = c.expectError()
	assert.Equal(t, "tl", id)
	assert.Contains(t, msg, "outside")
	assert.False(t, h.exists("../x"))
}

// The role prompt is read when each run starts: SOUL.md of --workdir for a
// run without working_folder, that of the working folder otherwise (the
// built-in one where it has none).
func TestRolePromptOfTheWorkingFolder(t *testing.T) {
	h := start(t, testConfig(t))
	h.write("SOUL.md", "You are the harbour pilot.")
	h.write("plain/readme.txt", "no role here")
	c := h.dial()
	res := c.run(runReq("", "react", "who are you?"))
	require.NotNil(t, res.end, "%+v", res.err)
	assert.Equal(t, "The harbour pilot.", res.end.Reply)
	r := runReq("", "react", "who are you?")
	r.WorkingFolder = new("plain")
	res = c.run(r)
	require.NotNil(t, res.end, "%+v", res.err)
	assert.Equal(t, "The built-in assistant.", res.end.Reply)
	h.write("plain/SOUL.md", "You are the harbour pilot.")
	res = c.run(r)
	require.NotNil(t, res.end, "%+v", res.err)
	assert.Equal(t, "The harbour pilot.", res.end.Reply, "read at run start")
}
