package server

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/generated/agentchatapi"
	"github.com/agentwire/agentwire/internal/agent"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/llm"
	"github.com/agentwire/agentwire/internal/protocol"
	"github.com/agentwire/agentwire/internal/protocol/wsconn"
)

// Each canonical event the scenario produces reaches the client as the
// agentchat frame the protocol names.
func TestAgentchatEvents(t *testing.T) {
	cfg := testConfig(t)
	writeFile(t, cfg.Workdir, "notes.txt", "hello from notes\n")
	ts := startServer(t, cfg, Options{})
	c := dial(t, ts.url())

	t.Run("thinking", func(t *testing.T) {
		c.chat("think first", "events-thinking")
		c.expect(
			userMessage("think first"),
			thinking("The user wants me to think first."),
			agentMessage("Thought it through."),
		)
	})

	t.Run("tool call and result", func(t *testing.T) {
		c.chat("look around", "events-tools")
		c.expect(userMessage("look around"), agentMessage("Listing the folder and reading notes.txt."))
		assertToolArgs(t, c.next(), "ls", map[string]any{"path": "."})
		assertToolArgs(t, c.next(), "read", map[string]any{"path": "notes.txt"})
		// The two reads run in parallel: their results come in either order.
		results := map[string]agentchatapi.ToolResultEvent{}
		for range 2 {
			r, ok := c.next().(agentchatapi.ToolResultEvent)
			require.True(t, ok, "want a tool_result")
			results[r.ToolName] = r
		}
		assert.True(t, results["ls"].Success)
		assert.Contains(t, results["ls"].Result, "notes.txt")
		assert.Equal(t, toolResult("read", "hello from notes\n", true), results["read"])
		c.expect(agentMessage("notes.txt says: hello from notes\n"))
	})

	t.Run("failing tool", func(t *testing.T) {
		c.chat("read missing file", "events-failing-tool")
		c.expect(userMessage("read missing file"), toolCall("read", map[string]any{"path": "missing.txt"}))
		r, ok := c.next().(agentchatapi.ToolResultEvent)
		require.True(t, ok, "want a tool_result")
		assert.Equal(t, "read", r.ToolName)
		assert.False(t, r.Success)
		assert.Contains(t, r.Result, "missing.txt")
		c.expect(agentMessage("The read failed."))
	})

	t.Run("input request", func(t *testing.T) {
		// agentchat cannot carry a question to a person: the call fails at
		// once instead of waiting for an answer that cannot come.
		c.chat("ask me something", "events-input")
		c.expect(userMessage("ask me something"), toolCall("ask_user", map[string]any{"prompt": "What's your name?"}))
		r, ok := c.next().(agentchatapi.ToolResultEvent)
		require.True(t, ok, "want a tool_result")
		assert.Equal(t, "ask_user", r.ToolName)
		assert.False(t, r.Success)
		c.expect(agentMessage("Nobody can answer here."))
	})

	t.Run("model error", func(t *testing.T) {
		c.chat("fail now", "events-model-error")
		c.expect(userMessage("fail now"), errorFrame("model error: upstream unavailable"))
		// The socket and the session stay usable.
		c.chat("echo after the error", "events-model-error")
		c.expect(userMessage("echo after the error"), agentMessage("You said: echo after the error"))
	})
}

// Under the suggest policy a call that needs approval cannot be approved
// over agentchat: it does not run, and the user is told why.
func TestAgentchatApprovalUnderSuggest(t *testing.T) {
	cfg := testConfig(t, "--approval-policy", "suggest")
	ts := startServer(t, cfg, Options{})
	c := dial(t, ts.url())
	c.chat("make a file", "approval-suggest")
	c.expect(
		userMessage("make a file"),
		agentMessage("This runs a command that changes the working folder."),
		toolCall("bash", map[string]any{"command": "touch approved.txt"}),
	)
	// The refusal is said once: in the call's result.
	why, ok := c.next().(agentchatapi.ToolResultEvent)
	require.True(t, ok, "want the tool_result that explains the refusal")
	assert.Contains(t, why.Result, "touch approved.txt")
	assert.Contains(t, why.Result, "needs approval")
	assert.Contains(t, why.Result, "--approval-policy")
	assert.False(t, why.Success)
	c.expect(agentMessage("Not run."))
	assert.NoFileExists(t, filepath.Join(cfg.Workdir, "approved.txt"))
}

// Under full-auto the same call runs.
func TestAgentchatApprovalUnderFullAuto(t *testing.T) {
	cfg := testConfig(t, "--approval-policy", "full-auto")
	ts := startServer(t, cfg, Options{})
	c := dial(t, ts.url())
	c.chat("make a file", "approval-full-auto")
	c.expect(
		userMessage("make a file"),
		agentMessage("This runs a command that changes the working folder."),
		toolCall("bash", map[string]any{"command": "touch approved.txt"}),
	)
	r, ok := c.next().(agentchatapi.ToolResultEvent)
	require.True(t, ok, "want a tool_result")
	assert.Equal(t, "bash", r.ToolName)
	assert.True(t, r.Success, r.Result)
	c.expect(agentMessage("approved.txt exists now."))
	assert.FileExists(t, filepath.Join(cfg.Workdir, "approved.txt"))
}

// Frames the server cannot accept are answered with an error frame, and
// the socket stays usable.
func TestAgentchatInvalidFrames(t *testing.T) {
	ts := startServer(t, testConfig(t), Options{})
	c := dial(t, ts.url())
	big := `{"type":"chat","message":"` + strings.Repeat("x", 2<<20) + `"}`
	for _, tc := range []struct {
		name, frame, want string
		prefix            bool
	}{
		{"empty message", `{"type":"chat","message":""}`, "Empty message received", false},
		{"whitespace message", `{"type":"chat","message":" \n\t "}`, "Empty message received", false},
		{"unknown type", `{"type":"nope","message":"hi"}`, "Unknown message type: nope", false},
		{"malformed JSON", `{"type":"chat",`, "Invalid message: invalid JSON", true},
		{"not an object", `["chat"]`, "Invalid message: must be object", false},
		{"missing type", `{"message":"hi"}`, "Invalid message: /type: is required", false},
		{"type not a string", `{"type":7}`, "Invalid message: /type: must be string", false},
		{"missing message", `{"type":"chat"}`, "Invalid message: /message: is required", false},
		{"message not a string", `{"type":"chat","message":5}`, "Invalid message: /message: must be string", false},
		{"2 MiB frame", big, "Invalid message: frame exceeds", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.send([]byte(tc.frame))
			got, ok := c.next().(agentchatapi.ErrorEvent)
			require.True(t, ok, "want an error frame")
			if tc.prefix {
				assert.True(t, strings.HasPrefix(got.Error, tc.want), "error %q, want it to start with %q", got.Error, tc.want)
			} else {
				assert.Equal(t, tc.want, got.Error)
			}
		})
	}
	c.chat("echo still here", "")
	c.expect(userMessage("echo still here"), agentMessage("You said: echo still here"))
}

// A frame over the read limit closes the socket with 1009; other sockets
// go on.
func TestAgentchatFrameOverReadLimit(t *testing.T) {
	ts := startServer(t, testConfig(t), Options{})
	c := dial(t, ts.url())
	other := dial(t, ts.url())
	huge := `{"type":"chat","message":"` + strings.Repeat("x", 5<<20) + `"}`
	// The server may close before the whole frame is written.
	_ = writeFrame(c.ws, []byte(huge))
	c.expectClose(websocket.StatusMessageTooBig)

	other.chat("echo unaffected", "")
	other.expect(userMessage("echo unaffected"), agentMessage("You said: echo unaffected"))
}

// Two sockets on one session both see every frame of it; a socket on
// another session sees none.
func TestAgentchatTabsShareSession(t *testing.T) {
	ts := startServer(t, testConfig(t), Options{})
	tab1, tab2, stranger := dial(t, ts.url()), dial(t, ts.url()), dial(t, ts.url())

	// A socket joins a session with its first chat that names it.
	tab1.chat("echo one", "tabs")
	turn1 := []agentchatapi.Outbound{userMessage("echo one"), agentMessage("You said: echo one")}
	tab1.expect(turn1...)
	tab2.chat("echo two", "tabs")
	turn2 := []agentchatapi.Outbound{userMessage("echo two"), agentMessage("You said: echo two")}
	tab1.expect(turn2...)
	tab2.expect(turn2...)
	tab1.chat("think together", "tabs")
	turn3 := []agentchatapi.Outbound{
		userMessage("think together"),
		thinking("The user wants me to think first."),
		agentMessage("Thought it through."),
	}
	tab1.expect(turn3...)
	tab2.expect(turn3...)

	// Every frame of "tabs" was queued for the stranger, had it been a
	// target, before tab1 saw the last one: its next frames are its own.
	stranger.chat("echo mine", "elsewhere")
	stranger.expect(userMessage("echo mine"), agentMessage("You said: echo mine"))
}

// A chat sent while a turn of the same session runs waits for it: both are
// answered, in the order sent.
func TestAgentchatQueuesChatWhileTurnRuns(t *testing.T) {
	ts := startServer(t, testConfig(t), Options{})
	c := dial(t, ts.url())
	c.chat("slow please", "queue")
	c.expect(userMessage("slow please"))
	// The slow reply takes a while to stream: this chat arrives while it runs.
	c.chat("echo second", "queue")
	c.expect(
		agentMessage(slowReply),
		userMessage("echo second"),
		agentMessage("You said: echo second"),
	)
	assert.Equal(t, []string{"slow please", "echo second"}, userTexts(ts.history("queue")))
}

const slowReply = "This reply streams one word every twenty milliseconds, so that it is still running when the test acts on it."

// A new socket that names the same session continues its history: the
// model's transcript holds both turns. Nothing of the old turn is replayed
// to the new socket.
func TestAgentchatReconnectContinuesSession(t *testing.T) {
	ts := startServer(t, testConfig(t), Options{})
	c1 := dial(t, ts.url())
	c1.chat("echo first", "resume")
	c1.expect(userMessage("echo first"), agentMessage("You said: echo first"))
	require.NoError(t, c1.ws.Close(websocket.StatusNormalClosure, ""))

	c2 := dial(t, ts.url())
	c2.chat("echo second", "resume")
	c2.expect(userMessage("echo second"), agentMessage("You said: echo second"))
	assertTranscript(t, ts.history("resume"), "echo first", "You said: echo first", "echo second", "You said: echo second")
}

// The history of a session survives a restart of the server.
func TestAgentchatRestartKeepsHistory(t *testing.T) {
	cfg := testConfig(t)
	ts := startServer(t, cfg, Options{})
	c1 := dial(t, ts.url())
	c1.chat("echo before the restart", "restart")
	c1.expect(userMessage("echo before the restart"), agentMessage("You said: echo before the restart"))
	closed := c1.closeCode()
	ts.shutdown()
	assert.Equal(t, websocket.StatusGoingAway, <-closed)

	ts2 := startServer(t, cfg, Options{})
	c2 := dial(t, ts2.url())
	c2.chat("echo after the restart", "restart")
	c2.expect(userMessage("echo after the restart"), agentMessage("You said: echo after the restart"))
	assertTranscript(t, ts2.history("restart"),
		"echo before the restart", "You said: echo before the restart",
		"echo after the restart", "You said: echo after the restart")
}

// Without session_id, a socket's chats share one conversation that ends
// with the socket: another socket starts its own.
func TestAgentchatWithoutSessionLastsAsLongAsSocket(t *testing.T) {
	ts := startServer(t, testConfig(t), Options{})
	c1 := dial(t, ts.url())
	c1.chat("echo a", "")
	c1.expect(userMessage("echo a"), agentMessage("You said: echo a"))
	c1.chat("echo b", "")
	c1.expect(userMessage("echo b"), agentMessage("You said: echo b"))
	c2 := dial(t, ts.url())
	c2.chat("echo c", "")
	c2.expect(userMessage("echo c"), agentMessage("You said: echo c"))

	infos, err := ts.threads.Threads(context.Background(), "", 100)
	require.NoError(t, err)
	var convs [][]string
	for _, info := range infos {
		convs = append(convs, userTexts(ts.history(info.ID)))
	}
	assert.ElementsMatch(t, [][]string{{"echo a", "echo b"}, {"echo c"}}, convs)
}

// --agentchat-broadcast=all restores the document's behaviour: every
// socket sees every session's frames, even one that never chatted.
func TestAgentchatBroadcastAll(t *testing.T) {
	ts := startServer(t, testConfig(t, "--agentchat-broadcast", "all"), Options{})
	a, b, idle := dial(t, ts.url()), dial(t, ts.url()), dial(t, ts.url())
	a.chat("echo from a", "broadcast-a")
	for _, c := range []*wsClient{a, b, idle} {
		c.expect(userMessage("echo from a"), agentMessage("You said: echo from a"))
	}
	b.chat("echo from b", "broadcast-b")
	for _, c := range []*wsClient{a, b, idle} {
		c.expect(userMessage("echo from b"), agentMessage("You said: echo from b"))
	}
}

// Fifty sessions at once each get exactly their own frames.
func TestAgentchatConcurrentSessions(t *testing.T) {
	const n = 50
	ts := startServer(t, testConfig(t), Options{})
	conns := make([]*websocket.Conn, n)
	for i := range conns {
		conns[i] = dial(t, ts.url()).ws
	}
	// Each phase must hold for every session; the second runs after every
	// turn of the first is over, so a stray frame of another session would
	// already be queued ahead of a socket's own.
	phase := func(check func(i int, ws *websocket.Conn) error) {
		var wg sync.WaitGroup
		for i, ws := range conns {
			wg.Go(func() {
				if err := check(i, ws); err != nil {
					t.Errorf("session %d: %v", i, err)
				}
			})
		}
		wg.Wait()
	}
	phase(func(i int, ws *websocket.Conn) error {
		tag := fmt.Sprintf("tag s%d", i)
		if err := writeFrame(ws, chatFrame(tag, fmt.Sprintf("many-%d", i))); err != nil {
			return err
		}
		got, err := readFrames(ws, func(m agentchatapi.Outbound) bool { return m == agentMessage("Done with "+tag+".") })
		if err != nil {
			return err
		}
		return checkTurn(got,
			userMessage(tag),
			agentMessage("Looking for "+tag+"."),
			toolCall("read", map[string]any{"path": tag + ".txt"}),
			nil, // the failed read's result, checked below
			agentMessage("Done with "+tag+"."),
		)
	})
	phase(func(i int, ws *websocket.Conn) error {
		echo := fmt.Sprintf("echo s%d", i)
		if err := writeFrame(ws, chatFrame(echo, fmt.Sprintf("many-%d", i))); err != nil {
			return err
		}
		var got []agentchatapi.Outbound
		for range 2 {
			m, err := readFrame(ws)
			if err != nil {
				return err
			}
			got = append(got, m)
		}
		return checkTurn(got, userMessage(echo), agentMessage("You said: "+echo))
	})
}

// checkTurn compares frames with want; a nil entry of want stands for the
// tool_result of the read before it, which must have failed.
func checkTurn(got []agentchatapi.Outbound, want ...agentchatapi.Outbound) error {
	if len(got) != len(want) {
		return fmt.Errorf("got %d frames %v, want %d", len(got), got, len(want))
	}
	for i, w := range want {
		if w == nil {
			r, ok := got[i].(agentchatapi.ToolResultEvent)
			if !ok || r.ToolName != "read" || r.Success {
				return fmt.Errorf("frame %d = %#v, want a failed read result", i, got[i])
			}
			continue
		}
		if got[i] != w {
			return fmt.Errorf("frame %d = %#v, want %#v", i, got[i], w)
		}
	}
	return nil
}

// A socket that stops reading while the server sends it a lot is closed
// with a policy violation; the run and other sessions are unaffected.
func TestAgentchatSlowSocketIsDisconnected(t *testing.T) {
	// Checking every 512 KiB frame against its schema would make the
	// server slower than the client that reads them, which this test
	// needs the other way round.
	ts := startServerChecked(t, testConfig(t), Options{Conn: wsconn.Options{QueueSize: 8, WriteTimeout: time.Minute}}, false)

	ctx, cancel := context.WithTimeout(context.Background(), frameTimeout)
	defer cancel()
	feed, err := protocol.Subscribe(ctx, ts.core, "flood", 0)
	require.NoError(t, err)
	defer feed.Close()

	// The flood's frames add up to far more than the kernel's socket
	// buffers hold, so the server's writes block and its queue fills. The
	// client's receive buffer is fixed small: left to autotune, Linux lets
	// it grow to tcp_rmem's maximum (32 MiB here), which swallows the flood.
	slow, err := dialWS(ts.url(), smallReceiveBuffer())
	require.NoError(t, err)
	defer slow.CloseNow()
	require.NoError(t, writeFrame(slow, chatFrame("flood please", "flood")))

	// The run goes on to its end whatever the socket does.
	for {
		e, ok := <-feed.Events()
		require.True(t, ok, "feed ended: %v", feed.Err())
		if e.Type() == event.TypeRunCompleted {
			break
		}
	}

	other := dial(t, ts.url())
	other.chat("echo unaffected", "calm")
	other.expect(userMessage("echo unaffected"), agentMessage("You said: echo unaffected"))

	// Once the slow client reads, it gets what was written before the
	// server gave up on it, then the close.
	ce := expectClose(t, slow, websocket.StatusPolicyViolation)
	assert.Equal(t, wsconn.ReasonSlow, ce.Reason)
	assert.Equal(t, []string{"echo unaffected"}, userTexts(ts.history("calm")))
}

// userTexts lists the user messages of a history.
func userTexts(h []event.Event) []string {
	var out []string
	for _, e := range h {
		if p, ok := e.Payload.(event.MessageUser); ok {
			out = append(out, p.Text)
		}
	}
	return out
}

// assertTranscript checks what the model is given of the thread on its
// next turn: the user and assistant messages, alternating.
func assertTranscript(t *testing.T, h []event.Event, want ...string) {
	t.Helper()
	var got []string
	for i, m := range agent.Transcript(h) {
		role := llm.RoleUser
		if i%2 == 1 {
			role = llm.RoleAssistant
		}
		assert.Equal(t, role, m.Role, "message %d", i)
		got = append(got, m.Content)
	}
	assert.Equal(t, want, got)
}

// The same continuity holds with the threads in PostgreSQL.
func TestAgentchatRestartOnPostgres(t *testing.T) {
	cfg := testConfig(t, "--database-url", postgresURL(t))
	session := uuid.NewString()
	ts := startServer(t, cfg, Options{})
	c1 := dial(t, ts.url())
	c1.chat("echo one", session)
	c1.expect(userMessage("echo one"), agentMessage("You said: echo one"))
	closed := c1.closeCode()
	ts.shutdown()
	assert.Equal(t, websocket.StatusGoingAway, <-closed)

	ts2 := startServer(t, cfg, Options{})
	c2 := dial(t, ts2.url())
	c2.chat("echo two", session)
	c2.expect(userMessage("echo two"), agentMessage("You said: echo two"))
	assertTranscript(t, ts2.history(session), "echo one", "You said: echo one", "echo two", "You said: echo two")
}
