package server

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/generated/agentchatapi"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/protocol"
	"github.com/agentwire/agentwire/internal/runs"
)

// The replies of the scenario's rules the tests below stream.
const (
	trickleReply = "This reply trickles in one word every fifty milliseconds, slowly enough that another socket can join " +
		"the session while it streams and still receive every word of it exactly once, with nothing repeated and " +
		"nothing left out at the end."
	trickleWords = 40
)

// text reads agent_message frames until their texts add up to want's
// length, and returns the texts; any other frame fails the test.
func (c *wsClient) text(want string) []string {
	c.t.Helper()
	var parts []string
	n := 0
	for n < len(want) {
		m, ok := c.next().(agentchatapi.AgentMessageEvent)
		require.True(c.t, ok, "want an agent_message; got so far %q", parts)
		require.NotEmpty(c.t, m.Message, "an agent_message with no text")
		parts = append(parts, m.Message)
		n += len(m.Message)
	}
	require.Equal(c.t, want, strings.Join(parts, ""), "the agent_messages %q", parts)
	return parts
}

// expectChunks reads one message sent as chunks: several agent_messages
// whose texts concatenate to want.
func (c *wsClient) expectChunks(want string) []string {
	c.t.Helper()
	parts := c.text(want)
	require.Greater(c.t, len(parts), 1, "the message came whole, not as chunks")
	return parts
}

// In chunks mode a reply is several agent_messages that concatenate to
// it, and nothing is repeated when it ends: the next frame is the next
// turn's.
func TestAgentchatStreamChunks(t *testing.T) {
	ts := startServer(t, testConfig(t), Options{})
	c := dial(t, ts.url()+"?stream=chunks")
	c.chat("echo one two three", "chunks")
	c.expect(userMessage("echo one two three"))
	parts := c.expectChunks("You said: echo one two three")
	assert.Equal(t, []string{"You ", "said: ", "echo ", "one ", "two ", "three"}, parts, "one frame per model chunk")

	c.chat("tag chunky", "chunks")
	c.expect(userMessage("tag chunky"))
	c.expectChunks("Looking for tag chunky.")
	c.expect(toolCall("read", map[string]any{"path": "tag chunky.txt"}))
	r, ok := c.next().(agentchatapi.ToolResultEvent)
	require.True(t, ok, "want the read's tool_result")
	assert.False(t, r.Success)
	c.expectChunks("Done with tag chunky.")

	// Reasoning stays one agent_thinking per block.
	c.chat("think again", "chunks")
	c.expect(userMessage("think again"), thinking("The user wants me to think first."))
	c.expectChunks("Thought it through.")

	c.chat("echo last", "chunks")
	c.expect(userMessage("echo last"))
	c.expectChunks("You said: echo last")
}

// Without ?stream and with the default flag nothing changes: one
// agent_message per message. ?stream=message says the same explicitly.
func TestAgentchatStreamMessageIsTheDefault(t *testing.T) {
	ts := startServer(t, testConfig(t), Options{})
	for _, url := range []string{ts.url(), ts.url() + "?stream=message"} {
		c := dial(t, url)
		session := "message-" + uuid.NewString()
		c.chat("echo one two three", session)
		c.expect(userMessage("echo one two three"), agentMessage("You said: echo one two three"))
		c.chat("echo again", session)
		c.expect(userMessage("echo again"), agentMessage("You said: echo again"))
	}
}

// --agentchat-stream=chunks makes chunks the default; ?stream=message
// gives a socket whole messages again.
func TestAgentchatStreamFlagAndOverride(t *testing.T) {
	ts := startServer(t, testConfig(t, "--agentchat-stream", "chunks"), Options{})

	c := dial(t, ts.url())
	c.chat("echo by default", "flag")
	c.expect(userMessage("echo by default"))
	c.expectChunks("You said: echo by default")

	m := dial(t, ts.url()+"?stream=message")
	m.chat("echo whole", "flag-override")
	m.expect(userMessage("echo whole"), agentMessage("You said: echo whole"))
	m.chat("echo whole again", "flag-override")
	m.expect(userMessage("echo whole again"), agentMessage("You said: echo whole again"))

	ch := dial(t, ts.url()+"?stream=chunks")
	ch.chat("echo chunks", "flag-chunks")
	ch.expect(userMessage("echo chunks"))
	ch.expectChunks("You said: echo chunks")
}

// A stream value the server does not know refuses the upgrade with 400,
// as agentloop refuses a bad thread_id.
func TestAgentchatStreamUnknownValueIsRefused(t *testing.T) {
	ts := startServer(t, testConfig(t), Options{})
	for _, q := range []string{"?stream=tokens", "?stream=", "?stream=CHUNKS", "?stream=chunks&stream=message"} {
		t.Run(q, func(t *testing.T) {
			code, ws := upgrade(t, ts.url()+q, nil, "")
			assert.Nil(t, ws)
			assert.Equal(t, http.StatusBadRequest, code)
			status, body := request(t, http.MethodGet, "http://"+ts.Addr("main")+"/ws"+q, "",
				nil, http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}, "Sec-WebSocket-Version": {"13"},
					"Sec-WebSocket-Key": {"dGhlIHNhbXBsZSBub25jZQ=="}})
			assert.Equal(t, http.StatusBadRequest, status)
			assert.True(t, strings.HasPrefix(body, "Bad stream: "), "body %q", body)
			assert.Contains(t, body, "message or chunks")
		})
	}
	// The socket the server does accept still works.
	c := dial(t, ts.url()+"?stream=chunks")
	c.chat("echo fine", "")
	c.expect(userMessage("echo fine"))
	c.expectChunks("You said: echo fine")
}

// Two sockets of one session, one in each mode, each get their own shape
// of the same turns, and everything else alike.
func TestAgentchatStreamModesShareSession(t *testing.T) {
	ts := startServer(t, testConfig(t), Options{})
	chunks, whole := dial(t, ts.url()+"?stream=chunks"), dial(t, ts.url()+"?stream=message")
	// Both join the session with a chat of their own. The whole message
	// is sent once the session has seen it completed, so chunks joins
	// after that turn: a socket that joins while a message streams is
	// sent what streamed so far, and the last chunk reaching a socket
	// says nothing about whether the message is over.
	whole.chat("echo from whole", "mixed")
	whole.expect(userMessage("echo from whole"), agentMessage("You said: echo from whole"))
	chunks.chat("tag mixed", "mixed")
	for _, c := range []*wsClient{chunks, whole} {
		c.expect(userMessage("tag mixed"))
	}
	chunks.expectChunks("Looking for tag mixed.")
	whole.expect(agentMessage("Looking for tag mixed."))
	for _, c := range []*wsClient{chunks, whole} {
		c.expect(toolCall("read", map[string]any{"path": "tag mixed.txt"}))
		r, ok := c.next().(agentchatapi.ToolResultEvent)
		require.True(t, ok, "want the read's tool_result")
		assert.False(t, r.Success)
	}
	chunks.expectChunks("Done with tag mixed.")
	whole.expect(agentMessage("Done with tag mixed."))

	// Nothing more is on either socket: the next frames are the next turn's.
	chunks.chat("echo end", "mixed")
	chunks.expect(userMessage("echo end"))
	whole.expect(userMessage("echo end"), agentMessage("You said: echo end"))
	chunks.expectChunks("You said: echo end")
}

// A socket that joins a session while a message streams gets that message
// exactly once: what streamed before it joined as one agent_message, then
// the rest chunk by chunk. A message socket joining then gets it whole.
// This holds whether the session already had a socket following it or
// the joining socket is its first, and whether the text reaches sockets
// once committed or ahead of its commit (--live-deltas), which commits
// it in fewer, larger deltas.
func TestAgentchatStreamJoinMidMessage(t *testing.T) {
	for _, live := range []string{"off", "200ms"} {
		t.Run("live-deltas "+live, func(t *testing.T) {
			testJoinMidMessage(t, live)
		})
	}
}

func testJoinMidMessage(t *testing.T, live string) {
	ts := startServer(t, testConfig(t, "--live-deltas", live), Options{})
	// A short reply streamed at once is one commit, and so one frame, when
	// deltas are committed in batches.
	chunked := replyChunks
	if live != "off" {
		chunked = replyText
	}

	t.Run("beside another socket", func(t *testing.T) {
		first := dial(t, ts.url()+"?stream=chunks")
		first.chat("trickle please", "mid-beside")
		first.expect(userMessage("trickle please"))
		var seen []string
		for range 3 {
			m, ok := first.next().(agentchatapi.AgentMessageEvent)
			require.True(t, ok)
			seen = append(seen, m.Message)
		}
		late, whole := dial(t, ts.url()+"?stream=chunks"), dial(t, ts.url())
		late.chat("echo late", "mid-beside")
		whole.chat("echo whole", "mid-beside")

		firstParts := append(seen, first.text(strings.TrimPrefix(trickleReply, strings.Join(seen, "")))...)
		assert.Len(t, firstParts, trickleWords, "the first socket gets every chunk")
		lateParts := late.text(trickleReply)
		assert.True(t, strings.HasPrefix(lateParts[0], strings.Join(seen, "")),
			"the first frame %q carries what streamed before the socket joined", lateParts[0])
		assert.Less(t, len(lateParts), trickleWords, "the late socket joined mid-message: %q", lateParts)
		whole.expect(agentMessage(trickleReply))
		deltas := 0
		logged, err := ts.core.Read(t.Context(), "mid-beside", 0, 1000)
		require.NoError(t, err)
		for _, e := range logged {
			if e.Type() == event.TypeMessageCompleted {
				break // the trickle's end; queued turns follow
			}
			if e.Type() == event.TypeMessageDelta {
				deltas++
			}
		}
		if live == "off" {
			assert.Equal(t, trickleWords, deltas, "a delta per chunk")
		} else {
			assert.Less(t, deltas, trickleWords/2, "the chunks went out ahead of their commit, which took several at once")
		}

		// The queued chats run next; nothing of the message comes again.
		order := queuedTurns(t, whole, replyWhole, "echo late", "echo whole")
		assert.Equal(t, order, queuedTurns(t, first, chunked, "echo late", "echo whole"))
		assert.Equal(t, order, queuedTurns(t, late, chunked, "echo late", "echo whole"))
	})

	t.Run("as the session's first socket", func(t *testing.T) {
		// The run starts over another protocol: no agentchat socket follows
		// the session when the message begins.
		const session = "mid-first"
		ctx, cancel := context.WithTimeout(context.Background(), frameTimeout)
		defer cancel()
		feed, err := protocol.Subscribe(ctx, ts.core, session, 0)
		require.NoError(t, err)
		defer feed.Close()
		_, err = ts.core.Post(ctx, session, runs.Input{Text: "trickle please"})
		require.NoError(t, err)
		for deltas := 0; deltas < 3; {
			e, ok := <-feed.Events()
			require.True(t, ok, "feed ended: %v", feed.Err())
			if e.Type() == event.TypeMessageDelta {
				deltas++
			}
		}

		late, whole := dial(t, ts.url()+"?stream=chunks"), dial(t, ts.url())
		late.chat("echo late", session)
		whole.chat("echo whole", session)
		lateParts := late.text(trickleReply)
		assert.Less(t, len(lateParts), trickleWords, "the socket joined mid-message: %q", lateParts)
		assert.GreaterOrEqual(t, len(lateParts[0]), len("This reply trickles "),
			"the first frame %q carries what streamed before the socket joined", lateParts[0])
		whole.expect(agentMessage(trickleReply))
		order := queuedTurns(t, whole, replyWhole, "echo late", "echo whole")
		assert.Equal(t, order, queuedTurns(t, late, chunked, "echo late", "echo whole"))
	})
}

// queuedTurns reads the turns of echo chats queued at once from several
// sockets, which run in the order their posts arrived: each is the user's
// message and its reply, whole or in chunks. It returns the order.
// replyShape is how a reply reaches a socket.
type replyShape int

const (
	replyWhole  replyShape = iota // one agent_message
	replyChunks                   // several agent_messages
	replyText                     // one or more agent_messages
)

func queuedTurns(t *testing.T, c *wsClient, shape replyShape, echoes ...string) []string {
	t.Helper()
	var order []string
	for range echoes {
		u, ok := c.next().(agentchatapi.UserMessageEvent)
		require.True(t, ok, "want the user_message of a queued chat")
		require.Contains(t, echoes, u.Message)
		order = append(order, u.Message)
		switch shape {
		case replyWhole:
			c.expect(agentMessage("You said: " + u.Message))
		case replyChunks:
			c.expectChunks("You said: " + u.Message)
		case replyText:
			c.text("You said: " + u.Message)
		}
	}
	assert.ElementsMatch(t, echoes, order)
	return order
}
