package threads_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/generated/agentchatapi"
	"github.com/agentwire/agentwire/generated/threadsapi"
	"github.com/agentwire/agentwire/internal/protocol/threads"
	"github.com/agentwire/agentwire/internal/server"
)

// socket is an agentchat client on the same server: a thread's id is the
// agentchat session_id.
type socket struct {
	t *testing.T
	c *websocket.Conn
}

func (h *harness) dial(t *testing.T) *socket {
	t.Helper()
	c, _, err := websocket.Dial(t.Context(), "ws://"+h.srv.Addr("main")+"/ws", nil)
	require.NoError(t, err)
	t.Cleanup(func() { c.CloseNow() })
	return &socket{t: t, c: c}
}

func (s *socket) chat(session uuid.UUID, text string) {
	s.t.Helper()
	b, err := json.Marshal(map[string]string{"type": "chat", "message": text, "session_id": session.String()})
	require.NoError(s.t, err)
	require.NoError(s.t, s.c.Write(s.t.Context(), websocket.MessageText, b))
}

// until reads frames, checked against the agentchat schema, up to and
// including the first for which stop is true.
func (s *socket) until(stop func(agentchatapi.Outbound) bool) []agentchatapi.Outbound {
	s.t.Helper()
	var got []agentchatapi.Outbound
	for {
		ctx, cancel := context.WithTimeout(s.t.Context(), 20*time.Second)
		_, b, err := s.c.Read(ctx)
		cancel()
		require.NoError(s.t, err, "after %d frames", len(got))
		m, err := agentchatapi.DecodeOutbound(b)
		require.NoError(s.t, err, "frame %s", b)
		got = append(got, m)
		if stop(m) {
			return got
		}
	}
}

// agentSays stops at the agent message that ends with suffix.
func agentSays(suffix string) func(agentchatapi.Outbound) bool {
	return func(m agentchatapi.Outbound) bool {
		a, ok := m.(agentchatapi.AgentMessageEvent)
		return ok && strings.HasSuffix(a.Message, suffix)
	}
}

func userTexts(msgs []threadsapi.Message) []string {
	var out []string
	for _, m := range msgs {
		if m.MessageType == threadsapi.MessageMessageTypeUser {
			out = append(out, m.Content.UserContent.Text)
		}
	}
	return out
}

// TestRESTThreadContinuesOverAgentchat: a conversation started with POST
// goes on over /ws with the thread id as session_id, and a client that
// resumes the thread's stream sees the socket's run.
func TestRESTThreadContinuesOverAgentchat(t *testing.T) {
	h := start(t, testConfig(t), server.Options{})
	thread := uuid.New()
	turn1 := h.send(thread, "echo from rest")
	require.Equal(t, threads.EventDone, string(turn1[len(turn1)-1].Type))

	ws := h.dial(t)
	ws.chat(thread, "echo from ws")
	frames := ws.until(agentSays("echo from ws"))
	require.Equal(t, []agentchatapi.Outbound{
		agentchatapi.NewUserMessageEvent("echo from ws"),
		agentchatapi.NewAgentMessageEvent("You said: echo from ws"),
	}, frames, "the socket's run sees only its own turn")

	// The REST client resumes where its stream ended and gets the
	// socket's run.
	r, err := h.client.Resume(t.Context(), thread, threads.EventID(turn1[len(turn1)-1]))
	require.NoError(t, err)
	defer r.Close()
	turn2 := readAll(t, r)
	require.Equal(t, "agent_text done", shape(turn2))
	_, texts := agentTexts(t, thread, turn2)
	for _, text := range texts {
		assert.Equal(t, "You said: echo from ws", text)
	}

	msgs := h.history(thread)
	require.Len(t, msgs, 4)
	assert.Equal(t, []string{"echo from rest", "echo from ws"}, userTexts(msgs))
	assert.Equal(t, "You said: echo from ws", msgs[3].Content.AgentContent.Text)
}

// TestAgentchatSessionContinuesOverREST: a conversation started over /ws
// goes on with POST to the session's thread, and the socket sees the
// POST-started run live.
func TestAgentchatSessionContinuesOverREST(t *testing.T) {
	cfg := testConfig(t)
	h := start(t, cfg, server.Options{})
	thread := uuid.New()
	ws := h.dial(t)
	ws.chat(thread, "echo from ws")
	ws.until(agentSays("You said: echo from ws"))

	s, err := h.client.SendMessage(t.Context(), thread, "speak slowly")
	require.NoError(t, err)
	defer s.Close()
	first := readN(t, s, 1)

	// The socket watches the session: the REST run reaches it without the
	// socket sending anything.
	frames := ws.until(agentSays("and then the run completes."))
	posted := append(first, readAll(t, s)...)
	require.Equal(t, "agent_text tool_call tool_result agent_text done", shape(posted))
	ids, texts := agentTexts(t, thread, posted)
	require.Len(t, ids, 2)

	require.Len(t, frames, 5, "frames %v", frames)
	assert.Equal(t, agentchatapi.NewUserMessageEvent("speak slowly"), frames[0])
	assert.Equal(t, agentchatapi.NewAgentMessageEvent(texts[ids[0]]), frames[1])
	call, ok := frames[2].(agentchatapi.ToolCallEvent)
	require.True(t, ok, "frame 2 is %T", frames[2])
	assert.Equal(t, "ls", call.ToolName)
	assert.JSONEq(t, `{"path":"."}`, call.ToolArgs)
	result, ok := frames[3].(agentchatapi.ToolResultEvent)
	require.True(t, ok, "frame 3 is %T", frames[3])
	assert.True(t, result.Success)
	assert.Equal(t, agentchatapi.NewAgentMessageEvent(texts[ids[1]]), frames[4])

	msgs := h.history(thread)
	require.Len(t, msgs, 7)
	assert.Equal(t, []string{"echo from ws", "speak slowly"}, userTexts(msgs))
	assert.Equal(t, "You said: echo from ws", msgs[1].Content.AgentContent.Text)
	assert.Equal(t, ids[1], msgs[6].MessageID)
}
