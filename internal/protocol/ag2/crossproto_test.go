package ag2_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/coder/websocket"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/generated/ag2api"
	"github.com/agentwire/agentwire/internal/protocol/threads"
)

// A chat started over AG2 is continued over the threads API and over
// agentchat (its chat_id is their thread id and session_id); the AG2
// socket sees those turns live, and the threads history has them all.
func TestChatContinuesOverThreadsAndAgentchat(t *testing.T) {
	h := start(t, testConfig(t))
	id := uuid.New()
	c := h.dial(id.String())
	c.say("echo from ag2")
	c.turn()

	tc, err := threads.NewClient("http://"+h.srv.Addr("main"), http.DefaultClient)
	require.NoError(t, err)
	s, err := tc.SendMessage(t.Context(), id, "echo from threads")
	require.NoError(t, err)
	for {
		_, err := s.Next(t.Context())
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
	}
	s.Close()
	texts := ofType(c.turn(), ag2api.TypeChatText)
	require.Len(t, texts, 2)
	assert.Equal(t, "user", texts[0].msg.(ag2api.Text).Data.Agent)
	assert.Equal(t, "echo from threads", texts[0].msg.(ag2api.Text).Data.Content)
	assert.Equal(t, "You said: echo from threads", texts[1].msg.(ag2api.Text).Data.Content)

	ac, _, err := websocket.Dial(t.Context(), "ws://"+h.srv.Addr("main")+"/ws", nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ac.CloseNow() })
	b, _ := json.Marshal(map[string]string{"type": "chat", "message": "echo from agentchat", "session_id": id.String()})
	require.NoError(t, ac.Write(t.Context(), websocket.MessageText, b))
	texts = ofType(c.turn(), ag2api.TypeChatText)
	require.Len(t, texts, 2)
	assert.Equal(t, "echo from agentchat", texts[0].msg.(ag2api.Text).Data.Content)

	hist, err := tc.History(context.Background(), id)
	require.NoError(t, err)
	var all []string
	for _, m := range hist.Messages {
		all = append(all, m.Content.UserContent.Text+m.Content.AgentContent.Text)
	}
	assert.Equal(t, []string{"echo from ag2", "You said: echo from ag2", "echo from threads", "You said: echo from threads",
		"echo from agentchat", "You said: echo from agentchat"}, all)
}

// A pending input request survives a reconnect: the new socket gets it in
// the replay and answers it.
func TestPendingRequestSurvivesAReconnect(t *testing.T) {
	h := start(t, testConfig(t))
	c := h.dial("")
	c.say("ask me again")
	frames := c.until(ag2api.TypeChatInputRequest)
	req := frames[len(frames)-1].msg.(ag2api.InputRequest).Data
	c.close()

	c2 := h.dial(c.chat)
	c2.resume(0)
	replayed := c2.until(ag2api.TypeChatResumeBoundary)
	reqs := ofType(replayed, ag2api.TypeChatInputRequest)
	require.Len(t, reqs, 1)
	assert.Equal(t, req.RequestID, reqs[0].msg.(ag2api.InputRequest).Data.RequestID)
	assert.True(t, reqs[0].replay)
	c2.answer(req.RequestID, "Grace")
	texts := ofType(c2.turn(), ag2api.TypeChatText)
	assert.Equal(t, "Hello, Grace!", texts[len(texts)-1].msg.(ag2api.Text).Data.Content)
}

// An approval asked on one tab is answered on another; both see the ack.
func TestApprovalAnsweredFromAnotherTab(t *testing.T) {
	h := start(t, testConfig(t))
	a := h.dial("")
	b := h.dial(a.chat)
	a.say("make a file")
	frames := b.until(ag2api.TypeChatInputRequest)
	req := frames[len(frames)-1].msg.(ag2api.InputRequest).Data
	a.until(ag2api.TypeChatInputRequest)
	b.answer(req.RequestID, "approve always")
	for _, c := range []*client{a, b} {
		frames := c.turn()
		acks := ofType(frames, ag2api.TypeChatInputAck)
		require.Len(t, acks, 1)
		assert.Equal(t, req.RequestID, acks[0].msg.(ag2api.InputAck).Data.RequestID)
	}
}

// Fifty chats at once, each with its own socket: every socket sees only
// its own chat's frames.
func TestFiftyChatsNoCrosstalk(t *testing.T) {
	h := start(t, testConfig(t))
	const n = 50
	clients := make([]*client, n)
	for i := range clients {
		clients[i] = h.dial("")
	}
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() { c.say(fmt.Sprintf("echo tag %02d", i)) })
	}
	wg.Wait()
	for i, c := range clients {
		frames := c.turn()
		checkSeqs(t, frames)
		for _, f := range frames {
			assert.Equal(t, c.chat, f.str("chat_id"))
		}
		texts := ofType(frames, ag2api.TypeChatText)
		require.Len(t, texts, 1)
		assert.Equal(t, fmt.Sprintf("You said: echo tag %02d", i), texts[0].msg.(ag2api.Text).Data.Content)
	}
}

// --listen ag2=ADDR serves the protocol at that address's root too.
func TestOwnListenerServesAtTheRoot(t *testing.T) {
	h := start(t, testConfig(t, "--listen", "ag2=127.0.0.1:0"))
	addr := h.srv.Addr("ag2")
	require.NotEmpty(t, addr)
	for _, path := range []string{"/default/e1/root-chat/u1", "/ws/default/e1/root-chat/u1"} {
		c := dialURL(t, "ws://"+addr+path)
		c.chat = "root-chat"
		c.say("echo at " + path)
		texts := ofType(c.turn(), ag2api.TypeChatText)
		assert.Equal(t, "You said: echo at "+path, texts[len(texts)-1].msg.(ag2api.Text).Data.Content)
		c.close()
	}
}

// An input request of an AG2 chat is answered over AgentLoop, which joins
// the chat's thread: the AG2 socket sees the ack and the run go on.
func TestInputRequestAnsweredOverAgentLoop(t *testing.T) {
	h := start(t, testConfig(t))
	c := h.dial("")
	c.say("ask me over there")
	frames := c.until(ag2api.TypeChatInputRequest)
	req := frames[len(frames)-1].msg.(ag2api.InputRequest).Data

	al, _, err := websocket.Dial(t.Context(), "ws://"+h.srv.Addr("main")+"/agentloop?thread_id="+c.chat, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = al.CloseNow() })
	// Its first frame names the thread; the replay follows. Answer once it
	// has seen the question.
	for {
		_, b, err := al.Read(t.Context())
		require.NoError(t, err)
		// The question itself, not the ask_user call that carries its
		// prompt too: only then does the socket's next message answer it.
		if strings.Contains(string(b), "Your next message answers this question.") {
			break
		}
	}
	in := `{"id":"1","type":"user_input","payload":{"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"Turing"}]}]}}`
	require.NoError(t, al.Write(t.Context(), websocket.MessageText, []byte(in)))
	frames = c.turn()
	acks := ofType(frames, ag2api.TypeChatInputAck)
	require.Len(t, acks, 1)
	assert.Equal(t, req.RequestID, acks[0].msg.(ag2api.InputAck).Data.RequestID)
	texts := ofType(frames, ag2api.TypeChatText)
	assert.Equal(t, "Hello, Turing!", texts[len(texts)-1].msg.(ag2api.Text).Data.Content)
}
