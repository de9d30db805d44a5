package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/generated/agentchatapi"
)

// frameTimeout bounds every wait for a frame: long enough for a loaded
// machine under -race, short enough that a missing frame fails the test
// instead of hanging it.
const frameTimeout = 20 * time.Second

// wsClient is an agentchat client over a real WebSocket. Every frame it
// reads is decoded with agentchatapi.DecodeOutbound, so the schema checks
// everything the server sends.
type wsClient struct {
	t  testing.TB
	ws *websocket.Conn
}

func dial(t testing.TB, url string) *wsClient {
	t.Helper()
	ws, err := dialWS(url, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ws.CloseNow() })
	return &wsClient{t: t, ws: ws}
}

func dialWS(url string, hc *http.Client) (*websocket.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), frameTimeout)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: hc})
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", url, err)
	}
	ws.SetReadLimit(64 << 20)
	return ws, nil
}

// smallReceiveBuffer is an HTTP client whose connections have a fixed
// 64 KiB receive buffer, so a server writing to a client that does not
// read feels it after a few frames, whatever the kernel's autotuning.
func smallReceiveBuffer() *http.Client {
	var d net.Dialer
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			if tc, ok := c.(*net.TCPConn); ok {
				if err := tc.SetReadBuffer(64 << 10); err != nil {
					c.Close()
					return nil, err
				}
			}
			return c, nil
		},
	}}
}

func chatFrame(message, session string) []byte {
	m := agentchatapi.ChatRequest{Message: message}
	if session != "" {
		m.SessionID = &session
	}
	b, err := agentchatapi.Encode(m)
	if err != nil {
		panic(err)
	}
	return b
}

// chat sends a chat message; session "" leaves session_id out.
func (c *wsClient) chat(message, session string) {
	c.t.Helper()
	c.send(chatFrame(message, session))
}

func (c *wsClient) send(frame []byte) {
	c.t.Helper()
	require.NoError(c.t, writeFrame(c.ws, frame))
}

func writeFrame(ws *websocket.Conn, frame []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), frameTimeout)
	defer cancel()
	return ws.Write(ctx, websocket.MessageText, frame)
}

// readFrame reads and decodes one frame. It never asserts, so goroutines
// may call it.
func readFrame(ws *websocket.Conn) (agentchatapi.Outbound, error) {
	ctx, cancel := context.WithTimeout(context.Background(), frameTimeout)
	defer cancel()
	typ, b, err := ws.Read(ctx)
	if err != nil {
		return nil, err
	}
	if typ != websocket.MessageText {
		return nil, fmt.Errorf("got a %v frame, want text", typ)
	}
	m, err := agentchatapi.DecodeOutbound(b)
	if err != nil {
		return nil, fmt.Errorf("DecodeOutbound(%q) = %w", b, err)
	}
	return m, nil
}

// readFrames reads frames until stop holds for one, and returns them all.
func readFrames(ws *websocket.Conn, stop func(agentchatapi.Outbound) bool) ([]agentchatapi.Outbound, error) {
	var got []agentchatapi.Outbound
	for {
		m, err := readFrame(ws)
		if err != nil {
			return got, fmt.Errorf("after %d frames %v: %w", len(got), got, err)
		}
		got = append(got, m)
		if stop(m) {
			return got, nil
		}
	}
}

func (c *wsClient) next() agentchatapi.Outbound {
	c.t.Helper()
	m, err := readFrame(c.ws)
	require.NoError(c.t, err)
	return m
}

// expect reads len(want) frames and checks them in order.
func (c *wsClient) expect(want ...agentchatapi.Outbound) {
	c.t.Helper()
	for i, w := range want {
		got := c.next()
		require.Equal(c.t, w, got, "frame %d", i)
	}
}

// expectClose reads until the socket closes and checks the close code.
func (c *wsClient) expectClose(code websocket.StatusCode) websocket.CloseError {
	c.t.Helper()
	return expectClose(c.t, c.ws, code)
}

// closeCode reads in the background, as a live client does, and reports
// the close code the socket ends with (-1 when it ends without a close
// frame).
func (c *wsClient) closeCode() <-chan websocket.StatusCode {
	out := make(chan websocket.StatusCode, 1)
	go func() {
		for {
			if _, err := readFrame(c.ws); err != nil {
				out <- websocket.CloseStatus(err)
				return
			}
		}
	}()
	return out
}

func expectClose(t testing.TB, ws *websocket.Conn, code websocket.StatusCode) websocket.CloseError {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), frameTimeout)
	defer cancel()
	for {
		_, b, err := ws.Read(ctx)
		if err == nil {
			if _, derr := agentchatapi.DecodeOutbound(b); derr != nil {
				t.Errorf("DecodeOutbound(%q) = %v", b, derr)
			}
			continue
		}
		var ce websocket.CloseError
		require.True(t, errors.As(err, &ce), "Read error %v, want a close frame with %v", err, code)
		require.Equal(t, code, ce.Code, "close reason %q", ce.Reason)
		return ce
	}
}

func userMessage(s string) agentchatapi.Outbound { return agentchatapi.NewUserMessageEvent(s) }

func agentMessage(s string) agentchatapi.Outbound { return agentchatapi.NewAgentMessageEvent(s) }

func thinking(s string) agentchatapi.Outbound { return agentchatapi.NewAgentThinkingEvent(s) }

func errorFrame(s string) agentchatapi.Outbound { return agentchatapi.NewErrorEvent(s) }

func toolResult(name, result string, ok bool) agentchatapi.Outbound {
	return agentchatapi.NewToolResultEvent(name, result, ok)
}

// toolCall is a tool_call frame; args is encoded as the JSON string the
// protocol carries.
func toolCall(name string, args map[string]any) agentchatapi.Outbound {
	b, err := json.Marshal(args)
	if err != nil {
		panic(err)
	}
	return agentchatapi.NewToolCallEvent(name, string(b))
}

// assertToolArgs checks that a tool_call's arguments are a JSON-encoded
// object equal to want.
func assertToolArgs(t testing.TB, m agentchatapi.Outbound, name string, want map[string]any) {
	t.Helper()
	tc, ok := m.(agentchatapi.ToolCallEvent)
	require.True(t, ok, "got %#v, want a tool_call", m)
	assert.Equal(t, name, tc.ToolName)
	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(tc.ToolArgs), &got), "tool_args %q", tc.ToolArgs)
	assert.Equal(t, want, got)
}
