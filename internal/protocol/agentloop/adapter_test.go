package agentloop_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// --listen agentloop=ADDR serves the protocol at the root of its own
// address too.
func TestOwnListener(t *testing.T) {
	h := start(t, testConfig(t, "--listen", "agentloop=127.0.0.1:0"))
	for _, u := range []string{"ws://" + h.srv.Addr("agentloop") + "/", "ws://" + h.srv.Addr("agentloop") + "/agentloop"} {
		c := dialURL(t, u)
		first := c.next()
		assert.Equal(t, "context_info", first.MessageType(), u)
		c.say("echo at the root")
		assert.Equal(t, "You said: echo at the root", messageText(items(c.turn())[0]))
		c.close()
	}
}

// A thread_id that cannot name a thread is refused before the upgrade.
func TestBadThreadID(t *testing.T) {
	h := start(t, testConfig(t))
	for _, id := range []string{"", "a b", "tab\there", strings.Repeat("x", 257)} {
		resp, err := http.Get("http://" + h.srv.Addr("main") + "/agentloop?thread_id=" + urlEscape(id))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "thread_id %q", id)
	}
}

// Shutdown closes the sockets with "going away" and ends their follows.
func TestShutdownClosesSockets(t *testing.T) {
	h := start(t, testConfig(t, "--shutdown-grace", "50ms"))
	a := h.dial("")
	b := h.dial(a.thread)
	a.say("make a file")
	a.expectApproval()
	b.expectApproval()
	done := make(chan error, 1)
	go func() { done <- h.srv.Shutdown(context.Background()) }()
	a.expectClosed(websocket.StatusGoingAway)
	b.expectClosed(websocket.StatusGoingAway)
	require.NoError(t, <-done)
	assert.False(t, h.exists("made.txt"), "the pending call never ran")
}

func urlEscape(s string) string {
	r := strings.NewReplacer(" ", "%20", "\t", "%09")
	return r.Replace(s)
}
