package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/generated/agentchatapi"
	"github.com/agentwire/agentwire/generated/threadsapi"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/protocol/threads"
)

// cluster is a set of server processes sharing a PostgreSQL schema of
// their own and the NATS server CI runs.
type cluster struct {
	t    *testing.T
	args []string
	dir  string
	env  []string // added to every node's environment
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	pg, nats := os.Getenv("AGENTWIRE_TEST_POSTGRES_URL"), os.Getenv("AGENTWIRE_TEST_NATS_URL")
	if pg == "" || nats == "" {
		t.Skip("AGENTWIRE_TEST_POSTGRES_URL and AGENTWIRE_TEST_NATS_URL not both set: no PostgreSQL and NATS to run a cluster on")
	}
	schema := "cluster_" + strings.ToLower(event.NewID())
	conn, err := pgx.Connect(t.Context(), pg)
	require.NoError(t, err)
	_, err = conn.Exec(t.Context(), "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize())
	require.NoError(t, err)
	require.NoError(t, conn.Close(t.Context()))
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), pg)
		if err == nil {
			_, _ = conn.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
			_ = conn.Close(context.Background())
		}
	})
	sep := "?"
	if strings.Contains(pg, "?") {
		sep = "&"
	}
	dir := t.TempDir()
	return &cluster{t: t, dir: dir, args: []string{
		"--database-url", pg + sep + "search_path=" + schema,
		"--bus-url", nats,
		"--run-lease", "2s",
		"--scenario", scenarioPath(t),
		"--workdir", filepath.Join(dir, "work"),
		"--shutdown-grace", "1s",
	}}
}

// node starts one server of the cluster.
func (c *cluster) node(id string) *proc {
	c.t.Helper()
	return startProcEnv(c.t, c.dir, c.env, append([]string{"--node-id", id, "--data-dir", filepath.Join(c.dir, id)}, c.args...)...)
}

func threadsClient(t *testing.T, p *proc) *threads.Client {
	t.Helper()
	c, err := threads.NewClient("http://"+p.addr, nil)
	require.NoError(t, err)
	return c
}

// chatSocket is an agentchat client.
type chatSocket struct {
	t  *testing.T
	ws *websocket.Conn
}

func dialChat(t *testing.T, p *proc) *chatSocket {
	t.Helper()
	ws, _, err := websocket.Dial(t.Context(), "ws://"+p.addr+"/ws", nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ws.CloseNow() })
	return &chatSocket{t: t, ws: ws}
}

func (c *chatSocket) chat(session, text string) {
	c.t.Helper()
	b, err := json.Marshal(map[string]string{"type": "chat", "message": text, "session_id": session})
	require.NoError(c.t, err)
	require.NoError(c.t, c.ws.Write(c.t.Context(), websocket.MessageText, b))
}

// until reads frames until one satisfies stop, and returns them all.
func (c *chatSocket) until(stop func(agentchatapi.Outbound) bool) []agentchatapi.Outbound {
	c.t.Helper()
	var got []agentchatapi.Outbound
	for {
		ctx, cancel := context.WithTimeout(c.t.Context(), 30*time.Second)
		_, b, err := c.ws.Read(ctx)
		cancel()
		require.NoError(c.t, err, "after %v", got)
		m, err := agentchatapi.DecodeOutbound(b)
		require.NoError(c.t, err, "frame %s", b)
		got = append(got, m)
		if stop(m) {
			return got
		}
	}
}

func agentSaid(prefix string) func(agentchatapi.Outbound) bool {
	return func(m agentchatapi.Outbound) bool {
		a, ok := m.(agentchatapi.AgentMessageEvent)
		return ok && strings.HasPrefix(a.Message, prefix)
	}
}

// TestClusterServesOneConversation runs three nodes on one PostgreSQL and
// one NATS: a conversation goes on over whichever node a client reaches,
// and every client sees every run, wherever it runs. Input posted on one
// node while a run goes on on another waits behind it.
func TestClusterServesOneConversation(t *testing.T) {
	c := newCluster(t)
	a, b, n3 := c.node("a"), c.node("b"), c.node("c")
	thread := uuid.New()
	session := thread.String()

	watcher := dialChat(t, a)
	watcher.chat(session, "echo hello")
	watcher.until(agentSaid("Echo: echo hello"))

	// A run started on b, watched live from a (agentchat) and c (threads).
	post, err := threadsClient(t, b).SendMessage(t.Context(), thread, "slow please")
	require.NoError(t, err)
	defer post.Close()
	var first stream
	first.read(t, post, 1)
	// c's client joins b's run from its first chunk: the resume stream
	// replays what it missed, then follows live, until the run ends.
	resume, err := threadsClient(t, n3).Resume(t.Context(), thread, fmt.Sprint(first.ids[0].Seq-1))
	require.NoError(t, err)
	defer resume.Close()

	// Input given to c while b runs waits for b's run.
	other := dialChat(t, n3)
	other.chat(session, "echo queued on c")

	first.read(t, post, -1)
	require.True(t, first.ended)
	assert.Equal(t, threadsapi.DoneSSEStreamEvent, first.end.Type)
	seen := watcher.until(agentSaid("Echo: echo queued on c"))
	var users []string
	for _, m := range seen {
		if u, ok := m.(agentchatapi.UserMessageEvent); ok {
			users = append(users, u.Message)
		}
	}
	assert.Equal(t, []string{"slow please", "echo queued on c"}, users, "node a's socket sees the runs of b and c, in order")
	var replay stream
	replay.read(t, resume, -1)
	assert.Equal(t, threadsapi.DoneSSEStreamEvent, replay.end.Type)
	assert.Equal(t, first.text, replay.text, "c's client got b's run whole, once")

	h, err := threadsClient(t, a).History(t.Context(), thread)
	require.NoError(t, err)
	var says []string
	for _, m := range h.Messages {
		switch m.MessageType {
		case threadsapi.MessageMessageTypeUser:
			says = append(says, "user: "+m.Content.UserContent.Text)
		case threadsapi.MessageMessageTypeAgent:
			says = append(says, "agent: "+strings.Fields(m.Content.AgentContent.Text)[0])
		}
	}
	assert.Equal(t, []string{"user: echo hello", "agent: Echo:", "user: slow please", "agent: This", "user: echo queued on c", "agent: Echo:"}, says)
}

// TestClusterNodeKilledMidRun kills the node that runs a thread's run with
// SIGKILL: within the lease another node ends the run as interrupted, a
// client watching from that node sees it end with an error after every
// stored event, once each, and new input on the thread runs there.
func TestClusterNodeKilledMidRun(t *testing.T) {
	c := newCluster(t)
	a, b := c.node("a"), c.node("b")
	thread := uuid.New()

	post, err := threadsClient(t, b).SendMessage(t.Context(), thread, "slow please")
	require.NoError(t, err)
	defer post.Close()
	var onB stream
	onB.read(t, post, 2)
	watch, err := threadsClient(t, a).Resume(t.Context(), thread, "")
	require.NoError(t, err)
	defer watch.Close()
	var onA stream
	onA.read(t, watch, 1)

	b.kill()
	onA.read(t, watch, -1)
	require.True(t, onA.ended, "the stream on a ends")
	require.Equal(t, threadsapi.ErrorSSEStreamEvent, onA.end.Type)
	assert.Equal(t, "The server stopped while this run was going on.", onA.end.ErrorSSE.Data.Error)
	onA.checkOrder(t, "the stream on a")
	h, err := threadsClient(t, a).History(t.Context(), thread)
	require.NoError(t, err)
	last := h.Messages[len(h.Messages)-1]
	require.Equal(t, threadsapi.MessageMessageTypeAgent, last.MessageType)
	assert.Equal(t, threadsapi.NewOptBool(true), last.Content.AgentContent.Incomplete)
	assert.Equal(t, onA.text, last.Content.AgentContent.Text, "node a's client got the whole stored answer, once")

	again, err := threadsClient(t, a).SendMessage(t.Context(), thread, "echo after the crash")
	require.NoError(t, err)
	defer again.Close()
	var after stream
	after.read(t, again, -1)
	assert.Equal(t, threadsapi.DoneSSEStreamEvent, after.end.Type, "new input runs on the node that is left")
	assert.Equal(t, "Echo: echo after the crash", after.text)
}

// TestClusterRaceToStart has two nodes take input for one idle thread at
// the same moment, 100 times: each time one runs and the other waits for
// it, so both run, one after the other.
func TestClusterRaceToStart(t *testing.T) {
	c := newCluster(t)
	nodes := []*proc{c.node("a"), c.node("b")}
	clients := []*threads.Client{threadsClient(t, nodes[0]), threadsClient(t, nodes[1])}
	for round := range 100 {
		thread := uuid.New()
		var wg sync.WaitGroup
		ends := make([]stream, 2)
		for i := range 2 {
			wg.Go(func() {
				s, err := clients[i].SendMessage(t.Context(), thread, fmt.Sprintf("echo %d from node %d", round, i))
				if !assert.NoError(t, err) {
					return
				}
				defer s.Close()
				ends[i].read(t, s, -1)
			})
		}
		wg.Wait()
		for i, e := range ends {
			require.Equal(t, threadsapi.DoneSSEStreamEvent, e.end.Type, "round %d, node %d", round, i)
			require.Equal(t, fmt.Sprintf("Echo: echo %d from node %d", round, i), e.text, "round %d, node %d", round, i)
		}
		h, err := clients[0].History(t.Context(), thread)
		require.NoError(t, err)
		require.Len(t, h.Messages, 4, "round %d", round)
		for j := 0; j < 4; j += 2 {
			require.Equal(t, threadsapi.MessageMessageTypeUser, h.Messages[j].MessageType, "round %d: the runs did not interleave", round)
			require.Equal(t, "Echo: "+h.Messages[j].Content.UserContent.Text, h.Messages[j+1].Content.AgentContent.Text, "round %d", round)
		}
	}
}

// agentloopSocket is an AgentLoop connection to one node, read as raw
// frames.
type agentloopSocket struct {
	t  *testing.T
	ws *websocket.Conn
}

func dialAgentloop(t *testing.T, p *proc, thread string) *agentloopSocket {
	t.Helper()
	url := "ws://" + p.addr + "/agentloop"
	if thread != "" {
		url += "?thread_id=" + thread
	}
	ws, _, err := websocket.Dial(t.Context(), url, nil)
	require.NoError(t, err)
	ws.SetReadLimit(16 << 20)
	t.Cleanup(func() { _ = ws.CloseNow() })
	return &agentloopSocket{t: t, ws: ws}
}

type agentloopFrame struct {
	Type    string         `json:"type"`
	Payload map[string]any `json:"payload"`
}

// until reads frames until one of type typ, and returns it with every frame
// type read on the way.
func (s *agentloopSocket) until(typ string) (agentloopFrame, []string) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.t.Context(), 30*time.Second)
	defer cancel()
	var seen []string
	for {
		_, b, err := s.ws.Read(ctx)
		require.NoError(s.t, err, "waiting for %s after %v", typ, seen)
		var f agentloopFrame
		require.NoError(s.t, json.Unmarshal(b, &f), "%s", b)
		seen = append(seen, f.Type)
		if f.Type == typ {
			return f, seen
		}
	}
}

func (s *agentloopSocket) send(frame string) {
	s.t.Helper()
	require.NoError(s.t, s.ws.Write(s.t.Context(), websocket.MessageText, []byte(frame)))
}

func userInput(text string) string {
	return fmt.Sprintf(`{"id":%q,"type":"user_input","payload":{"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":%q}]}]}}`,
		uuid.NewString(), text)
}

func review(decision string) string {
	return fmt.Sprintf(`{"id":%q,"type":"approval_response","payload":{"review":%q}}`, uuid.NewString(), decision)
}

// TestClusterApprovalsReachTheRunsNode: a run on node b waits for
// approvals; the first is given over a socket on node a and the command
// runs on b; the second is refused with no-exit over a socket on node c and
// the turn ends. Every socket, whichever node it is on, sees the same turn.
func TestClusterApprovalsReachTheRunsNode(t *testing.T) {
	c := newCluster(t)
	a, b, n3 := c.node("a"), c.node("b"), c.node("c")
	work := filepath.Join(c.dir, "work")

	onB := dialAgentloop(t, b, "")
	first, _ := onB.until("context_info")
	thread, _ := first.Payload["threadId"].(string)
	require.NotEmpty(t, thread, "the first frame names the thread: %v", first.Payload)

	onB.send(userInput("make a file"))
	req, _ := onB.until("approval_request")
	assert.Contains(t, fmt.Sprint(req.Payload["command"]), "touch first.txt")

	onA := dialAgentloop(t, a, thread)
	pending, _ := onA.until("approval_request")
	assert.Equal(t, req.Payload["command"], pending.Payload["command"], "node a sees the pending request")
	onA.send(review("yes"))
	for _, s := range []*agentloopSocket{onA, onB} {
		_, seen := s.until("agent_finished")
		assert.Contains(t, seen, "response_item")
	}
	_, err := os.Stat(filepath.Join(work, "first.txt"))
	require.NoError(t, err, "the approved command ran")

	onC := dialAgentloop(t, n3, thread)
	onC.until("context_info")
	onB.send(userInput("make another"))
	second, _ := onC.until("approval_request")
	assert.Contains(t, fmt.Sprint(second.Payload["command"]), "touch second.txt", "node c is asked only what is pending")
	onC.send(review("no-exit"))
	for _, s := range []*agentloopSocket{onA, onB, onC} {
		s.until("agent_finished")
	}
	_, err = os.Stat(filepath.Join(work, "second.txt"))
	assert.True(t, os.IsNotExist(err), "the refused command did not run: %v", err)

	h, err := threadsClient(t, a).History(t.Context(), uuid.MustParse(thread))
	require.NoError(t, err)
	var users int
	for _, m := range h.Messages {
		if m.MessageType == threadsapi.MessageMessageTypeUser {
			users++
		}
	}
	assert.Equal(t, 2, users, "both turns are in the thread, once")
}
