package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/coder/websocket"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An MCP server's tool, configured with --mcp, is offered to the model and
// called in a run like a built-in: the run shows it as a tool call and its
// result, and the answer uses it.
func TestMCPToolInARun(t *testing.T) {
	calc := sdk.NewServer(&sdk.Implementation{Name: "calc", Version: "1"}, nil)
	sdk.AddTool(calc, &sdk.Tool{Name: "add", Description: "Adds two numbers.", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *sdk.CallToolRequest, in struct {
			A int `json:"a"`
			B int `json:"b"`
		}) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprint(in.A + in.B)}}}, nil, nil
		})
	mcpSrv := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return calc }, nil))
	// Closed after the server (cleanups run last first), whose MCP
	// session holds a stream open on it.
	t.Cleanup(mcpSrv.Close)
	file := filepath.Join(t.TempDir(), "mcp.yaml")
	require.NoError(t, os.WriteFile(file, []byte("servers:\n  calc:\n    url: "+mcpSrv.URL+"\n"), 0o644))

	ts := startServer(t, testConfig(t, "--mcp", file, "--scenario", "testdata/mcp.yaml"), Options{})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, ts.url(), nil)
	require.NoError(t, err)
	defer ws.CloseNow()
	chat, _ := json.Marshal(map[string]any{"type": "chat", "message": "add them", "session_id": "mcp"})
	require.NoError(t, ws.Write(ctx, websocket.MessageText, chat))
	var seen []map[string]any
	for {
		_, b, err := ws.Read(ctx)
		require.NoError(t, err)
		var f map[string]any
		require.NoError(t, json.Unmarshal(b, &f))
		seen = append(seen, f)
		if f["type"] == "agent_message" {
			break
		}
	}
	var call, result map[string]any
	for _, f := range seen {
		switch f["type"] {
		case "tool_call":
			call = f
		case "tool_result":
			result = f
		}
	}
	require.NotNil(t, call, "%v", seen)
	assert.Equal(t, "calc__add", call["tool_name"])
	require.NotNil(t, result, "%v", seen)
	assert.Equal(t, "5", result["result"])
	assert.Equal(t, true, result["success"])
	assert.Equal(t, "The sum is 5.", seen[len(seen)-1]["message"])
}
