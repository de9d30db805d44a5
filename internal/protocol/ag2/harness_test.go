package ag2_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/generated/ag2api"
	"github.com/agentwire/agentwire/internal/config"
	"github.com/agentwire/agentwire/internal/server/servertest"
)

// frameTimeout bounds every wait for a frame: long enough for a loaded
// machine, short enough that a missing frame fails the test promptly.
const frameTimeout = 15 * time.Second

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
	return servertest.Config(t, append([]string{"--llm", "scripted", "--scenario", "testdata/server.yaml", "--ag2-rate", "1000", "--ag2-burst", "1000"}, args...)...)
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

// url is the socket address of a chat.
func (h *harness) url(workflow, ent, chat, user string) string {
	return "ws://" + h.srv.Addr("main") + "/ws/" + url.PathEscape(workflow) + "/" + url.PathEscape(ent) + "/" +
		url.PathEscape(chat) + "/" + url.PathEscape(user)
}

// client is a ChatUI-style client: it checks every frame it sends and
// receives against the document.
type client struct {
	t    testing.TB
	ws   *websocket.Conn
	chat string
	// keeping and held: the client kept what it showed, and drops the
	// replayed frames up to seq held until the resume's boundary
	// (resumeKeeping).
	keeping bool
	held    int
}

// dial opens a socket on chat (a new one when chat is "") of the default
// workflow for enterprise e1 and user u1.
func (h *harness) dial(chat string) *client {
	h.t.Helper()
	if chat == "" {
		chat = "chat-" + uuid.NewString()
	}
	return h.dialAs(chat, "e1", "u1")
}

func (h *harness) dialAs(chat, ent, user string) *client {
	h.t.Helper()
	c := dialURL(h.t, h.url("default", ent, chat, user))
	c.chat = chat
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

func (c *client) sendRaw(frame string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), frameTimeout)
	defer cancel()
	require.NoError(c.t, c.ws.Write(ctx, websocket.MessageText, []byte(frame)))
}

// send sends a client message, checked against the document first.
func (c *client) send(m ag2api.Message) {
	c.t.Helper()
	b, err := ag2api.Encode(m)
	require.NoError(c.t, err)
	require.NoError(c.t, ag2api.ValidateInbound(b), "the test sends a frame the document does not allow: %s", b)
	c.sendRaw(string(b))
}

func (c *client) say(text string) {
	c.t.Helper()
	c.send(ag2api.UserInputSubmit{Type: ag2api.TypeUserInputSubmit, ChatID: &c.chat, Text: text})
}

func (c *client) answer(requestID, text string) {
	c.t.Helper()
	c.send(ag2api.UserInputSubmit{Type: ag2api.TypeUserInputSubmit, ChatID: &c.chat, RequestID: &requestID, Text: text})
}

func (c *client) resume(last int) {
	c.t.Helper()
	c.send(ag2api.ClientResume{Type: ag2api.TypeClientResume, ChatID: &c.chat, LastClientIndex: &last})
}

// resumeKeeping resumes as a client that kept the frames up to last on
// screen does (agentwire's TypeScript client): under the default
// --ag2-resume=transcript a new socket's first resume replays the chat
// from its start, the frames up to last first, and the client drops
// those.
func (c *client) resumeKeeping(last int) {
	c.t.Helper()
	c.keeping, c.held = true, last
	c.resume(last)
}

// got is one received frame: the decoded message and its envelope.
type got struct {
	msg    ag2api.Outbound
	raw    []byte
	typ    string
	seq    int // 0 when the frame has none
	replay bool
	data   map[string]any
}

func (g got) str(key string) string {
	s, _ := g.data[key].(string)
	return s
}

// next reads, checks and decodes the next frame.
func (c *client) next() got {
	c.t.Helper()
	for {
		g, err := c.tryNext()
		require.NoError(c.t, err)
		if c.keeping && g.typ == ag2api.TypeChatResumeBoundary {
			c.keeping = false
		}
		if c.keeping && g.replay && g.seq <= c.held {
			continue
		}
		return g
	}
}

func (c *client) tryNext() (got, error) {
	ctx, cancel := context.WithTimeout(context.Background(), frameTimeout)
	defer cancel()
	typ, b, err := c.ws.Read(ctx)
	if err != nil {
		return got{}, err
	}
	if typ != websocket.MessageText {
		return got{}, fmt.Errorf("a %v frame, want text", typ)
	}
	m, err := ag2api.DecodeOutbound(b)
	if err != nil {
		return got{}, fmt.Errorf("DecodeOutbound(%s) = %w", b, err)
	}
	var env struct {
		Type      string         `json:"type"`
		Data      map[string]any `json:"data"`
		Timestamp string         `json:"timestamp"`
		Replay    bool           `json:"replay"`
	}
	if err := json.Unmarshal(b, &env); err != nil {
		return got{}, err
	}
	if _, err := time.Parse(time.RFC3339Nano, env.Timestamp); err != nil {
		return got{}, fmt.Errorf("frame timestamp %q: %w: %s", env.Timestamp, err, b)
	}
	if err := checkFlat(b); err != nil {
		return got{}, err
	}
	g := got{msg: m, raw: b, typ: env.Type, replay: env.Replay, data: env.Data}
	if s, ok := env.Data["seq"].(float64); ok {
		g.seq = int(s)
	}
	return g, nil
}

// checkFlat checks that every field of a frame's data is also at its top
// level, with the same value, as ChatUI reads it.
func checkFlat(b []byte) error {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return err
	}
	var data map[string]json.RawMessage
	if err := json.Unmarshal(top["data"], &data); err != nil {
		return fmt.Errorf("data is not an object: %w: %s", err, b)
	}
	for k, v := range data {
		if string(top[k]) != string(v) {
			return fmt.Errorf("data.%s = %s but the top level has %q: %s", k, v, top[k], b)
		}
	}
	return nil
}

// until reads frames up to and including the first of type typ.
func (c *client) until(typ string) []got {
	c.t.Helper()
	var out []got
	for {
		g := c.next()
		out = append(out, g)
		if g.typ == typ {
			return out
		}
	}
}

// turn reads the frames of a run, through chat.run_complete.
func (c *client) turn() []got { return c.until(ag2api.TypeChatRunComplete) }

// expectError reads frames up to the next chat.error and returns it.
func (c *client) expectError() ag2api.ChatErrorData {
	c.t.Helper()
	frames := c.until(ag2api.TypeChatError)
	return frames[len(frames)-1].msg.(ag2api.ChatError).Data
}

// expectClosed waits for the server to close the socket with code, and
// returns the frames read before.
func (c *client) expectClosed(code websocket.StatusCode) []got {
	c.t.Helper()
	var frames []got
	for {
		g, err := c.tryNext()
		if err == nil {
			frames = append(frames, g)
			continue
		}
		var ce websocket.CloseError
		require.True(c.t, errors.As(err, &ce), "read error %v, want a close frame", err)
		assert.Equal(c.t, code, ce.Code)
		return frames
	}
}

func (c *client) close() { _ = c.ws.Close(websocket.StatusNormalClosure, "") }

func types(frames []got) []string {
	out := make([]string, len(frames))
	for i, f := range frames {
		out[i] = f.typ
	}
	return out
}

func ofType(frames []got, typ string) []got {
	var out []got
	for _, f := range frames {
		if f.typ == typ {
			out = append(out, f)
		}
	}
	return out
}

// checkSeqs checks that the frames that carry a seq carry increasing ones,
// but for the frames one event shows as: an input request's prompt as a
// chat.text, then the chat.input_request; a UI component's chat.tool_call,
// then its ui_tool_event; in a replay, an answer as a chat.text, then its
// chat.input_ack, and a failed run's chat.error, then its
// chat.run_complete.
func checkSeqs(t testing.TB, frames []got) {
	t.Helper()
	last, lastType := 0, ""
	for _, f := range frames {
		if f.seq == 0 {
			continue
		}
		pair := lastType == ag2api.TypeChatText && f.typ == ag2api.TypeChatInputRequest ||
			lastType == ag2api.TypeChatToolCall && f.typ == ag2api.TypeUIToolEvent ||
			f.replay && lastType == ag2api.TypeChatText && f.typ == ag2api.TypeChatInputAck ||
			f.replay && lastType == ag2api.TypeChatError && f.typ == ag2api.TypeChatRunComplete
		if f.seq == last && pair {
			lastType = f.typ
			continue
		}
		require.Greater(t, f.seq, last, "seq must increase: %s", f.raw)
		last, lastType = f.seq, f.typ
	}
}

// errCode is a chat.error's error_code.
func errCode(d ag2api.ChatErrorData) string {
	if d.ErrorCode == nil {
		return ""
	}
	return *d.ErrorCode
}

func details(t testing.TB, d ag2api.ChatErrorData) map[string]any {
	t.Helper()
	var m map[string]any
	if len(d.Details) > 0 {
		require.NoError(t, json.Unmarshal(d.Details, &m))
	}
	return m
}

func contextTimeout() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), frameTimeout)
}

func statFile(h *harness, name string) (os.FileInfo, error) {
	return os.Stat(filepath.Join(h.cfg.Workdir, name))
}
