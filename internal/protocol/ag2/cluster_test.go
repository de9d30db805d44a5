package ag2_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/generated/ag2api"
	"github.com/agentwire/agentwire/internal/event"
)

// clusterArgs are the flags of a node of a cluster on a fresh PostgreSQL
// schema and the test NATS server; the test is skipped without them.
func clusterArgs(t *testing.T) []string {
	t.Helper()
	base, natsURL := os.Getenv("AGENTWIRE_TEST_POSTGRES_URL"), os.Getenv("AGENTWIRE_TEST_NATS_URL")
	if base == "" || natsURL == "" {
		t.Skip("AGENTWIRE_TEST_POSTGRES_URL and AGENTWIRE_TEST_NATS_URL not set: no cluster to test against")
	}
	schema := "ag2_" + strings.ToLower(event.NewID())
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
	return []string{"--database-url", base + sep + "search_path=" + schema, "--bus-url", natsURL}
}

// Two nodes share a chat: a socket on each sees the other's turns, an
// artifact patched on one shows on the other, and the chat's scope holds
// on both.
func TestTwoNodesShareAChat(t *testing.T) {
	args := clusterArgs(t)
	a := startNoLeakCheck(t, testConfig(t, append(args, "--node-id", "a")...))
	b := startNoLeakCheck(t, testConfig(t, append(args, "--node-id", "b")...))
	ca := a.dialAs("cluster-chat", "acme", "alice")
	ca.say("echo on a")
	ca.turn()

	cb := b.dialAs("cluster-chat", "acme", "alice")
	cb.resume(0)
	replayed := cb.until(ag2api.TypeChatResumeBoundary)
	texts := ofType(replayed, ag2api.TypeChatText)
	require.Len(t, texts, 2)
	assert.Equal(t, "You said: echo on a", texts[1].msg.(ag2api.Text).Data.Content)

	cb.say("show artifact")
	frames := ca.until(ag2api.TypeChatToolCall)
	call := frames[len(frames)-1].msg.(ag2api.ToolCall).Data
	require.True(t, call.AwaitingResponse)
	cb.until(ag2api.TypeChatToolCall)
	ca.send(ag2api.ArtifactPatch{Type: ag2api.TypeArtifactPatch, Corr: call.Corr,
		Patch: byteOps(`{"op":"replace","path":"/title","value":"Shared"}`)})
	frames = cb.until(ag2api.TypeChatToolCall)
	assert.JSONEq(t, `{"title":"Shared","files":[{"name":"a.txt"}]}`, string(frames[len(frames)-1].msg.(ag2api.ToolCall).Data.Payload))
	cb.send(ag2api.InlineComponentResult{Type: ag2api.TypeInlineComponentResult, Corr: call.Corr, Data: []byte(`"ok"`)})
	end := ca.turn()
	assert.Equal(t, "completed", end[len(end)-1].msg.(ag2api.RunComplete).Data.Reason)

	// Refused at once (a client write could then fail: it sends nothing).
	other := b.dialAs("cluster-chat", "globex", "alice")
	assert.Empty(t, other.expectClosed(websocket.StatusPolicyViolation), "the scope holds on every node")
}
