package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// wsURL is the WebSocket URL of path (with query) on the server.
func wsURL(base *url.URL, path string, query url.Values) string {
	u := *base
	if u.Scheme == "https" {
		u.Scheme = "wss"
	} else {
		u.Scheme = "ws"
	}
	u.Path += path
	u.RawPath = ""
	u.RawQuery = query.Encode()
	return u.String()
}

// authHeader is the header that carries the credential, if any.
func authHeader(token string) http.Header {
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	return h
}

// wsClient is one WebSocket connection of a chat: a goroutine reads its
// frames and hands each to onFrame; writes take a deadline.
type wsClient struct {
	c      *websocket.Conn
	wg     sync.WaitGroup
	closed chan struct{}
	err    error // why reading stopped, set before closed is closed
}

// maxChatFrame bounds a frame the chat reads.
const maxChatFrame = 16 << 20

// dialWS connects to rawURL and starts reading. onFrame runs on the reading
// goroutine; onEnd runs there once reading stops, with the reason.
func dialWS(ctx context.Context, rawURL, token string, onFrame func([]byte), onEnd func(error)) (*wsClient, error) {
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(dctx, rawURL, &websocket.DialOptions{HTTPHeader: authHeader(token)})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			body := ""
			if resp.Body != nil {
				b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
				body = strings.TrimSpace(string(b))
			}
			if body != "" {
				return nil, fmt.Errorf("%s: %s: %s", rawURL, resp.Status, body)
			}
			return nil, fmt.Errorf("%s: %s", rawURL, resp.Status)
		}
		return nil, fmt.Errorf("%s: %w", rawURL, err)
	}
	c.SetReadLimit(maxChatFrame)
	w := &wsClient{c: c, closed: make(chan struct{})}
	w.wg.Go(func() {
		var err error
		for {
			var b []byte
			_, b, err = c.Read(context.Background())
			if err != nil {
				break
			}
			onFrame(b)
		}
		w.err = err
		close(w.closed)
		onEnd(err)
	})
	return w, nil
}

// write sends one frame.
func (w *wsClient) write(ctx context.Context, frame []byte) error {
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return w.c.Write(wctx, websocket.MessageText, frame)
}

// close closes the connection normally and waits for the reader.
func (w *wsClient) close() {
	_ = w.c.Close(websocket.StatusNormalClosure, "")
	w.wg.Wait()
}

// done reports whether reading has stopped.
func (w *wsClient) done() bool {
	select {
	case <-w.closed:
		return true
	default:
		return false
	}
}

// closeReason says why a connection ended, in words.
func closeReason(err error) error {
	if err == nil {
		return errors.New("closed")
	}
	if ce := (websocket.CloseError{}); errors.As(err, &ce) {
		if ce.Reason != "" {
			return fmt.Errorf("closed by the server: %s (%d)", ce.Reason, int(ce.Code))
		}
		return fmt.Errorf("closed by the server (%d)", int(ce.Code))
	}
	return err
}
