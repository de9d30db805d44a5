package providers_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/generated/ag2api"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/server/servertest"
)

// clusterArgs are the flags of a node of a cluster on a fresh PostgreSQL
// schema and the test NATS server; the test is skipped without them.
func clusterArgs(t *testing.T) []string {
	t.Helper()
	base, natsURL := os.Getenv("AGENTWIRE_TEST_POSTGRES_URL"), os.Getenv("AGENTWIRE_TEST_NATS_URL")
	if base == "" || natsURL == "" {
		t.Skip("AGENTWIRE_TEST_POSTGRES_URL and AGENTWIRE_TEST_NATS_URL not set: no cluster to test against")
	}
	schema := "providers_" + strings.ToLower(event.NewID())
	conn, err := pgx.Connect(t.Context(), base)
	require.NoError(t, err)
	_, err = conn.Exec(t.Context(), "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize())
	require.NoError(t, err)
	require.NoError(t, conn.Close(t.Context()))
	t.Cleanup(func() {
		if conn, err := pgx.Connect(context.Background(), base); err == nil {
			_, _ = conn.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
			_ = conn.Close(context.Background())
		}
	})
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	return []string{"--scenario", "testdata/cluster.yaml", "--ag2-rate", "1000", "--ag2-burst", "1000",
		"--database-url", base + sep + "search_path=" + schema, "--bus-url", natsURL}
}

// Two nodes share an AG2 chat over the NATS bus: a socket on each sees
// the other's turns, an artifact patched on one shows on the other, and
// the chat's scope holds on both.
func TestTwoNodesShareAnAG2Chat(t *testing.T) {
	args := clusterArgs(t)
	// Two servers in one process: the leak check would see each other's
	// goroutines.
	a := start(t, servertest.Config(t, append(args, "--node-id", "a")...), servertest.Options{NoLeakCheck: true})
	b := start(t, servertest.Config(t, append(args, "--node-id", "b")...), servertest.Options{NoLeakCheck: true})
	assert.Contains(t, a.Banner(), "node a of a cluster")
	ca := dialAG2(t, a, "cluster-chat", "acme", "alice")
	ca.say("echo on a")
	ca.until(ag2api.TypeChatRunComplete)

	cb := dialAG2(t, b, "cluster-chat", "acme", "alice")
	last := 0
	cb.send(ag2api.ClientResume{Type: ag2api.TypeClientResume, ChatID: &cb.chat, LastClientIndex: &last})
	var texts []ag2api.Outbound
	for _, f := range cb.until(ag2api.TypeChatResumeBoundary) {
		if f.MessageType() == ag2api.TypeChatText {
			texts = append(texts, f)
		}
	}
	require.Len(t, texts, 2)
	assert.Equal(t, "You said: echo on a", texts[1].(ag2api.Text).Data.Content)

	cb.say("show artifact")
	frames := ca.until(ag2api.TypeChatToolCall)
	call := frames[len(frames)-1].(ag2api.ToolCall).Data
	require.True(t, call.AwaitingResponse)
	cb.until(ag2api.TypeChatToolCall)
	ca.send(ag2api.ArtifactPatch{Type: ag2api.TypeArtifactPatch, Corr: call.Corr,
		Patch: []json.RawMessage{json.RawMessage(`{"op":"replace","path":"/title","value":"Shared"}`)}})
	frames = cb.until(ag2api.TypeChatToolCall)
	assert.JSONEq(t, `{"title":"Shared","files":[{"name":"a.txt"}]}`, string(frames[len(frames)-1].(ag2api.ToolCall).Data.Payload))
	cb.send(ag2api.InlineComponentResult{Type: ag2api.TypeInlineComponentResult, Corr: call.Corr, Data: []byte(`"ok"`)})
	end := ca.until(ag2api.TypeChatRunComplete)
	assert.Equal(t, "completed", end[len(end)-1].(ag2api.RunComplete).Data.Reason)

	// Refused at once (a client write could then fail: it sends nothing).
	other := dialAG2(t, b, "cluster-chat", "globex", "alice")
	for {
		b, err := other.read()
		if err == nil {
			t.Errorf("a socket out of the chat's scope is sent %s", b)
			continue
		}
		var ce websocket.CloseError
		require.True(t, errors.As(err, &ce), "read error %v, want a close frame", err)
		assert.Equal(t, websocket.StatusPolicyViolation, ce.Code, "the scope holds on every node")
		break
	}
}
