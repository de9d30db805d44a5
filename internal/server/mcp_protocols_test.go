package server_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/uuid"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/server/servertest"
)

// TestMCPToolOnEveryProtocol: a run that calls a tool of an MCP server
// (--mcp) shows it on every protocol as that protocol's tool call, under
// the name the model calls it by (server__tool), and its result, which
// the answer uses.
func TestMCPToolOnEveryProtocol(t *testing.T) {
	calc := sdk.NewServer(&sdk.Implementation{Name: "calc", Version: "1"}, nil)
	sdk.AddTool(calc, &sdk.Tool{Name: "add", Description: "Adds two numbers.", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *sdk.CallToolRequest, in struct {
			A int `json:"a"`
			B int `json:"b"`
		}) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprint(in.A + in.B)}}}, nil, nil
		})
	mcpSrv := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return calc }, nil))
	t.Cleanup(mcpSrv.Close) // after the server's, whose MCP session holds a stream open on it
	file := filepath.Join(t.TempDir(), "mcp.yaml")
	require.NoError(t, os.WriteFile(file, []byte("servers:\n  calc:\n    url: "+mcpSrv.URL+"\n"), 0o644))
	s := servertest.Start(t, servertest.Config(t, "--mcp", file, "--scenario", "testdata/mcp.yaml"), servertest.Options{})
	addr := s.Addr("main")

	for _, c := range []struct {
		proto      string
		turn       turn
		call       string // what the protocol's tool call frame (not a chunk of it) contains
		result     string // what the frame with the call's result contains
		resultHas5 string // what that frame says of the result, 5
	}{
		{"agentchat", wsTurn(func() string { return "/ws" }, `{"type":"chat","message":%s}`),
			`"type":"tool_call"`, `"type":"tool_result"`, `"result":"5"`},
		{"threads", threadsTurn, "event: tool_call", "event: tool_result", `"result":{"output":"5"}`},
		{"agentloop", wsTurn(func() string { return "/agentloop" },
			`{"id":"1","type":"user_input","payload":{"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":%s}]}]}}`),
			`"type":"function_call"`, `"type":"function_call_output"`, `{\"output\":\"5\"`},
		{"ag2", wsTurn(func() string { return "/ws/default/acme/" + uuid.NewString() + "/u" }, `{"type":"user.input.submit","text":%s}`),
			`"type":"chat.tool_call"`, `"type":"chat.tool_response"`, `"content":"5"`},
		{"loom", wsTurn(func() string { return "/loom" }, `{"type":"run","id":"r1","agent":"react","message":%s}`),
			`"type":"tool_call"}`, `"type":"tool_end"`, `"result":"5"`},
	} {
		t.Run(c.proto, func(t *testing.T) {
			call := c.turn(t, addr, "add them", c.call)
			assert.Contains(t, call, "calc__add", "the tool call names the MCP tool")
			result := c.turn(t, addr, "add them", c.result)
			assert.Contains(t, result, c.resultHas5, "the tool's result")
			if c.proto == "agentchat" { // a whole message a frame
				assert.Contains(t, c.turn(t, addr, "add them", `"type":"agent_message"`), "The sum is 5.")
			}
		})
	}
}
