package agentloop_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/generated/agentloopapi"
	"github.com/agentwire/agentwire/internal/config"
	"github.com/agentwire/agentwire/internal/server/servertest"
)

// frameTimeout bounds every wait for a frame: long enough for a loaded
// machine, short enough that a missing frame fails the test promptly.
const frameTimeout = 10 * time.Second

// harness is a real agentwire server on a random port.
type harness struct {
	t   *testing.T
	cfg config.Config
	srv *servertest.Server
}

// testConfig is the tests' configuration: free port, fresh folders and
// testdata/server.yaml; args override it as flags do.
func testConfig(t *testing.T, args ...string) config.Config {
	t.Helper()
	return servertest.Config(t, append([]string{"--scenario", "testdata/server.yaml"}, args...)...)
}

// start builds and starts a server that fails the test on any frame its
// document does not allow; it is shut down at cleanup.
func start(t *testing.T, cfg config.Config) *harness {
	t.Helper()
	return &harness{t: t, cfg: cfg, srv: servertest.Start(t, cfg, servertest.Options{})}
}

// startNoLeakCheck is start for a test that ends a server the way a crash
// would, or runs two in one process.
func startNoLeakCheck(t *testing.T, cfg config.Config) *harness {
	t.Helper()
	return &harness{t: t, cfg: cfg, srv: servertest.Start(t, cfg, servertest.Options{NoLeakCheck: true})}
}

func (h *harness) shutdown() { h.srv.Stop() }

func (h *harness) url(thread string) string {
	u := "ws://" + h.srv.Addr("main") + "/agentloop"
	if thread != "" {
		u += "?thread_id=" + url.QueryEscape(thread)
	}
	return u
}

func (h *harness) write(name, content string) {
	h.t.Helper()
	require.NoError(h.t, os.WriteFile(filepath.Join(h.cfg.Workdir, name), []byte(content), 0o644))
}

func (h *harness) read(name string) string {
	h.t.Helper()
	b, err := os.ReadFile(filepath.Join(h.cfg.Workdir, name))
	require.NoError(h.t, err)
	return string(b)
}

func (h *harness) exists(name string) bool {
	_, err := os.Stat(filepath.Join(h.cfg.Workdir, name))
	return err == nil
}

// client is an AgentLoop client: it checks every frame it sends and
// receives against the document.
type client struct {
	t      testing.TB
	ws     *websocket.Conn
	thread string // from the first frame
}

// dial connects to the thread (a new one when thread is "") and reads the
// first frame, which names the thread.
func (h *harness) dial(thread string) *client {
	h.t.Helper()
	c := dialURL(h.t, h.url(thread))
	first, ok := c.next().(agentloopapi.ContextInfoMessage)
	require.True(h.t, ok, "the first frame is a context_info")
	require.NotNil(h.t, first.Payload.ThreadID, "the first context_info names the thread")
	c.thread = *first.Payload.ThreadID
	if thread != "" {
		require.Equal(h.t, strings.ToLower(thread), c.thread)
	} else {
		_, err := uuid.Parse(c.thread)
		require.NoError(h.t, err, "a new thread is named by a UUID")
	}
	return c
}

func dialURL(t testing.TB, u string) *client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), frameTimeout)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, u, nil)
	require.NoError(t, err)
	ws.SetReadLimit(16 << 20)
	c := &client{t: t, ws: ws}
	t.Cleanup(func() { _ = ws.CloseNow() })
	return c
}

// sendRaw sends a frame as is.
func (c *client) sendRaw(frame string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), frameTimeout)
	defer cancel()
	require.NoError(c.t, c.ws.Write(ctx, websocket.MessageText, []byte(frame)))
}

// send sends a client message, checked against the document first.
func (c *client) send(m agentloopapi.Message) {
	c.t.Helper()
	b, err := agentloopapi.Encode(m)
	require.NoError(c.t, err)
	require.NoError(c.t, agentloopapi.ValidateInbound(b), "the test sends a frame the document does not allow: %s", b)
	c.sendRaw(string(b))
}

func (c *client) say(text string) {
	c.t.Helper()
	c.send(userInput(text))
}

func userInput(text string) agentloopapi.UserInputMessage {
	return agentloopapi.UserInputMessage{ID: uuid.NewString(), Type: agentloopapi.TypeUserInput,
		Payload: agentloopapi.UserInputMessagePayload{Input: []agentloopapi.ResponseInputItem{{
			Type: new("message"), Role: new("user"), Content: textContent(text),
		}}}}
}

// textContent is a message's content: one input_text part.
func textContent(text string) json.RawMessage {
	b, _ := json.Marshal([]map[string]string{{"type": "input_text", "text": text}})
	return b
}

func (c *client) review(review string) {
	c.t.Helper()
	c.send(reviewMsg(review))
}

func reviewMsg(review string) agentloopapi.ApprovalResponseMessage {
	return agentloopapi.ApprovalResponseMessage{ID: uuid.NewString(), Type: agentloopapi.TypeApprovalResponse,
		Payload: agentloopapi.ApprovalResponseMessagePayload{Review: review}}
}

// next reads, checks and decodes the next frame.
func (c *client) next() agentloopapi.Outbound {
	c.t.Helper()
	m, err := c.tryNext()
	require.NoError(c.t, err)
	return m
}

func (c *client) tryNext() (agentloopapi.Outbound, error) {
	ctx, cancel := context.WithTimeout(context.Background(), frameTimeout)
	defer cancel()
	typ, b, err := c.ws.Read(ctx)
	if err != nil {
		return nil, err
	}
	if typ != websocket.MessageText {
		return nil, fmt.Errorf("a %v frame, want text", typ)
	}
	m, err := agentloopapi.DecodeOutbound(b)
	if err != nil {
		return nil, fmt.Errorf("DecodeOutbound(%s) = %w", b, err)
	}
	var base struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(b, &base); err != nil || uuid.Validate(base.ID) != nil {
		return nil, fmt.Errorf("frame id %q is not a UUID: %s", base.ID, b)
	}
	return m, nil
}

// until reads frames up to and including the first of type T, and returns
// every frame read.
func until[T agentloopapi.Outbound](c *client) []agentloopapi.Outbound {
	c.t.Helper()
	var got []agentloopapi.Outbound
	for {
		m := c.next()
		got = append(got, m)
		if _, ok := m.(T); ok {
			return got
		}
	}
}

// turn reads the frames of one turn, through agent_finished and the
// context_info after it.
func (c *client) turn() []agentloopapi.Outbound {
	c.t.Helper()
	got := until[agentloopapi.AgentFinishedMessage](c)
	info, ok := c.next().(agentloopapi.ContextInfoMessage)
	require.True(c.t, ok, "agent_finished is followed by context_info")
	return append(got, info)
}

// expectError reads the next frame, which must be an error, and returns
// its message and details.
func (c *client) expectError() (string, map[string]any) {
	c.t.Helper()
	m := c.next()
	e, ok := m.(agentloopapi.ErrorMessage)
	require.True(c.t, ok, "want an error frame, got %s", describe(m))
	var details map[string]any
	if len(e.Payload.Details) > 0 {
		require.NoError(c.t, json.Unmarshal(e.Payload.Details, &details))
	}
	return e.Payload.Message, details
}

// expectApproval reads frames up to the next approval_request.
func (c *client) expectApproval() agentloopapi.ApprovalRequestMessagePayload {
	c.t.Helper()
	got := until[agentloopapi.ApprovalRequestMessage](c)
	return got[len(got)-1].(agentloopapi.ApprovalRequestMessage).Payload
}

// expectClosed waits for the server to close the socket with code.
func (c *client) expectClosed(code websocket.StatusCode) {
	c.t.Helper()
	for {
		_, err := c.tryNext()
		if err == nil {
			continue
		}
		var ce websocket.CloseError
		require.True(c.t, errors.As(err, &ce), "read error %v, want a close frame", err)
		assert.Equal(c.t, code, ce.Code)
		return
	}
}

// items returns the response items among frames.
func items(frames []agentloopapi.Outbound) []agentloopapi.ResponseItemValue {
	var out []agentloopapi.ResponseItemValue
	for _, f := range frames {
		if r, ok := f.(agentloopapi.ResponseItemMessage); ok {
			out = append(out, r.Payload.Value)
		}
	}
	return out
}

// kinds names frames for comparing sequences: the frame type, with the
// item type and role, or the loading state.
func kinds(frames []agentloopapi.Outbound) []string {
	out := make([]string, len(frames))
	for i, f := range frames {
		out[i] = describe(f)
	}
	return out
}

func describe(f agentloopapi.Outbound) string {
	switch m := f.(type) {
	case agentloopapi.ResponseItemMessage:
		switch v := m.Payload.Value.(type) {
		case agentloopapi.MessageItem:
			return "message/" + v.Role
		case agentloopapi.FunctionCallItem:
			return "function_call/" + v.Name
		case agentloopapi.FunctionCallOutputItem:
			return "function_call_output"
		case agentloopapi.LocalShellCallItem:
			return "local_shell_call"
		case agentloopapi.LocalShellCallOutputItem:
			return "local_shell_call_output"
		case agentloopapi.ReasoningItem:
			return "reasoning"
		}
	case agentloopapi.LoadingStateMessage:
		return fmt.Sprintf("loading_state/%v", m.Payload.Loading)
	}
	return f.MessageType()
}

// messageText is a message item's text.
func messageText(v agentloopapi.ResponseItemValue) string {
	m, ok := v.(agentloopapi.MessageItem)
	if !ok {
		return ""
	}
	var b strings.Builder
	for _, p := range m.Content {
		b.WriteString(p.Text)
	}
	return b.String()
}

// output decodes a call output's JSON string.
type output struct {
	Output   string `json:"output"`
	Metadata struct {
		ExitCode        *int     `json:"exit_code"`
		DurationSeconds *float64 `json:"duration_seconds"`
	} `json:"metadata"`
}

func decodeOutput(t testing.TB, s string) output {
	t.Helper()
	var o output
	require.NoError(t, json.Unmarshal([]byte(s), &o), "output %q", s)
	require.NotNil(t, o.Metadata.ExitCode, "output %q has metadata.exit_code", s)
	require.NotNil(t, o.Metadata.DurationSeconds, "output %q has metadata.duration_seconds", s)
	return o
}

func removeFile(dir, name string) error { return os.Remove(filepath.Join(dir, name)) }

// turnsReplayed reads the replay of n finished turns that a joining socket
// is sent: each ends with agent_finished, and replayed turns are not
// followed by context_info.
func (c *client) turnsReplayed(n int) []agentloopapi.Outbound {
	c.t.Helper()
	var got []agentloopapi.Outbound
	for range n {
		got = append(got, until[agentloopapi.AgentFinishedMessage](c)...)
	}
	return got
}

func countKind(frames []agentloopapi.Outbound, kind string) int {
	n := 0
	for _, k := range kinds(frames) {
		if k == kind {
			n++
		}
	}
	return n
}

// close closes the socket normally.
func (c *client) close() { _ = c.ws.Close(websocket.StatusNormalClosure, "") }
