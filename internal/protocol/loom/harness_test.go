package loom_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/generated/loomapi"
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
	return servertest.Config(t, append([]string{"--scenario", "testdata/server.yaml"}, args...)...)
}

// start builds and starts a server that fails the test on any frame its
// document does not allow; it is shut down at cleanup.
func start(t *testing.T, cfg config.Config) *harness {
	t.Helper()
	return &harness{t: t, cfg: cfg, srv: servertest.Start(t, cfg, servertest.Options{})}
}

// startLogging is start with the server's log (level warn) written to w.
func startLogging(t *testing.T, cfg config.Config, w io.Writer) *harness {
	t.Helper()
	return &harness{t: t, cfg: cfg, srv: servertest.Start(t, cfg, servertest.Options{Log: w})}
}

func (h *harness) write(name, content string) {
	h.t.Helper()
	p := filepath.Join(h.cfg.Workdir, name)
	require.NoError(h.t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(h.t, os.WriteFile(p, []byte(content), 0o644))
}

func (h *harness) exists(name string) bool {
	_, err := os.Stat(filepath.Join(h.cfg.Workdir, name))
	return err == nil
}

// client is a Loom client: it checks every frame it sends and receives
// against the document.
type client struct {
	t  testing.TB
	ws *websocket.Conn
}

// dial connects to the Loom socket at /loom of the main listener.
func (h *harness) dial() *client {
	h.t.Helper()
	return dialURL(h.t, "ws://"+h.srv.Addr("main")+"/loom")
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
func (c *client) sendRaw(typ websocket.MessageType, frame string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), frameTimeout)
	defer cancel()
	require.NoError(c.t, c.ws.Write(ctx, typ, []byte(frame)))
}

// send sends a request, checked against the document first.
func (c *client) send(m loomapi.Message) {
	c.t.Helper()
	b, err := loomapi.Encode(m)
	require.NoError(c.t, err)
	require.NoError(c.t, loomapi.ValidateInbound(b), "the test sends a frame the document does not allow: %s", b)
	c.sendRaw(websocket.MessageText, string(b))
}

// next reads, checks and decodes the next frame.
func (c *client) next() loomapi.Outbound {
	c.t.Helper()
	m, err := c.tryNext()
	require.NoError(c.t, err)
	return m
}

func (c *client) tryNext() (loomapi.Outbound, error) {
	ctx, cancel := context.WithTimeout(context.Background(), frameTimeout)
	defer cancel()
	typ, b, err := c.ws.Read(ctx)
	if err != nil {
		return nil, err
	}
	if typ != websocket.MessageText {
		return nil, fmt.Errorf("a %v frame, want text", typ)
	}
	m, err := loomapi.DecodeOutbound(b)
	if err != nil {
		return nil, fmt.Errorf("DecodeOutbound(%s) = %w", b, err)
	}
	return m, nil
}

// runReq is a run request.
func runReq(id, agent, message string) loomapi.RunRequest {
	r := loomapi.RunRequest{Type: loomapi.TypeRun, Agent: agent, Message: message}
	if id != "" {
		r.ID = &id
	}
	return r
}

// runResult is what a run sent: its stream events, then its run_end or
// its error.
type runResult struct {
	id     string
	events []loomapi.ProtocolEventValue
	end    *loomapi.RunEndResponse
	err    *loomapi.ErrorResponse
	other  []loomapi.Outbound // frames of no run read meanwhile
}

// run sends a run request and reads its frames to its end.
func (c *client) run(r loomapi.RunRequest) runResult {
	c.t.Helper()
	c.send(r)
	return c.readRun()
}

// readRun reads the frames of the next run to its run_end or error;
// every frame must belong to the same run.
func (c *client) readRun() runResult {
	c.t.Helper()
	var res runResult
	for {
		m := c.next()
		switch f := m.(type) {
		case loomapi.RunStreamEventResponse:
			if res.id == "" {
				res.id = f.ID
			}
			require.Equal(c.t, res.id, f.ID, "every frame of a run carries its id")
			res.events = append(res.events, f.Event.Value)
		case loomapi.RunEndResponse:
			require.Equal(c.t, res.id, f.ID)
			res.end = &f
			return res
		case loomapi.ErrorResponse:
			if f.ID != nil && (res.id == "" || *f.ID == res.id) {
				res.err = &f
				return res
			}
			res.other = append(res.other, m)
		default:
			res.other = append(res.other, m)
		}
	}
}

// until reads events of a run up to and including the first of type T.
func until[T loomapi.ProtocolEventValue](c *client) []loomapi.ProtocolEventValue {
	c.t.Helper()
	var got []loomapi.ProtocolEventValue
	for {
		m := c.next()
		f, ok := m.(loomapi.RunStreamEventResponse)
		require.True(c.t, ok, "want a run_stream_event, got %T %+v", m, m)
		got = append(got, f.Event.Value)
		if _, ok := f.Event.Value.(T); ok {
			return got
		}
	}
}

// expectError reads the next frame, which must be an error, and returns
// its id and text.
func (c *client) expectError() (string, string) {
	c.t.Helper()
	m := c.next()
	e, ok := m.(loomapi.ErrorResponse)
	require.True(c.t, ok, "want an error frame, got %T %+v", m, m)
	id := ""
	if e.ID != nil {
		id = *e.ID
	}
	return id, e.Error
}

// ping checks the socket is open and answering.
func (c *client) ping(id string) {
	c.t.Helper()
	c.send(loomapi.PingRequest{Type: loomapi.TypePing, ID: id})
	m := c.next()
	assert.Equal(c.t, loomapi.NewPongResponse(id), m)
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

// types names a run's events by their type.
func types(events []loomapi.ProtocolEventValue) []string {
	out := make([]string, len(events))
	for i, e := range events {
		b, _ := json.Marshal(e)
		var v struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(b, &v)
		out[i] = v.Type
	}
	return out
}

// envelope is an event's envelope fields.
type envelope struct {
	SessionID *string `json:"session_id"`
	NodeID    *string `json:"node_id"`
	EventID   *int    `json:"event_id"`
	Type      string  `json:"type"`
}

func envelopeOf(t testing.TB, e loomapi.ProtocolEventValue) envelope {
	b, err := json.Marshal(e)
	require.NoError(t, err)
	var env envelope
	require.NoError(t, json.Unmarshal(b, &env))
	return env
}

// chunks joins the content of a run's message_chunk events.
func chunks(events []loomapi.ProtocolEventValue) string {
	var b strings.Builder
	for _, e := range events {
		if m, ok := e.(loomapi.MessageChunkEvent); ok {
			b.WriteString(m.Content)
		}
	}
	return b.String()
}

func (c *client) close() { _ = c.ws.Close(websocket.StatusNormalClosure, "") }

// httpGet returns the status of a GET of u.
func httpGet(u string) (int, error) {
	resp, err := http.Get(u)
	if err != nil {
		return 0, err
	}
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}
