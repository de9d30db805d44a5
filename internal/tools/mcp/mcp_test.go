package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/leaktest"
	"github.com/agentwire/agentwire/internal/tools"
	"github.com/agentwire/agentwire/internal/tools/mcp"
	"github.com/agentwire/agentwire/internal/tools/sandbox"
	"github.com/agentwire/agentwire/internal/tools/sandbox/sandboxtest"
)

// serverArg makes the test binary an MCP server on its standard input and
// output (the stdio tests run it as one).
const serverArg = "__agentwire_test_mcp_server__"

// TestMain serves as the sandbox's launcher and as the stdio MCP server
// when the tests re-execute this binary as either.
func TestMain(m *testing.M) {
	sandbox.Main()
	if len(os.Args) > 1 && os.Args[1] == serverArg {
		if err := testServer().Run(context.Background(), &sdk.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	leaktest.Main(m, "agentwire/agentwire/internal/tools")
}

type addIn struct {
	A int `json:"a" jsonschema:"the first number"`
	B int `json:"b" jsonschema:"the second number"`
}

// testServer is an MCP server with a read-only tool and one that writes a
// file in its working folder.
func testServer() *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "test", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "add", Description: "Adds two numbers.", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *sdk.CallToolRequest, in addIn) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprint(in.A + in.B)}}}, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "note.write", Description: "Writes a note."},
		func(_ context.Context, _ *sdk.CallToolRequest, in struct {
			Text string `json:"text"`
		}) (*sdk.CallToolResult, any, error) {
			if err := os.WriteFile("note.txt", []byte(in.Text), 0o644); err != nil {
				return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: err.Error()}}}, nil, nil
			}
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "written"}}}, nil, nil
		})
	return s
}

func byName(ts []tools.Tool) map[string]tools.Tool {
	m := map[string]tools.Tool{}
	for _, t := range ts {
		m[t.Spec().Name] = t
	}
	return m
}

func call(t *testing.T, tl tools.Tool, args string) tools.Result {
	t.Helper()
	res, err := tl.Run(t.Context(), json.RawMessage(args), nil)
	require.NoError(t, err)
	return res
}

// A streamable-HTTP server's tools become agentwire tools named
// SERVER__TOOL, judged by their read-only hint, and run on the server.
func TestHTTPServer(t *testing.T) {
	srv := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return testServer() }, nil))
	defer srv.Close()
	set, err := mcp.Start(t.Context(), mcp.Config{Servers: map[string]mcp.Server{"calc": {URL: srv.URL}}}, nil, t.TempDir(), nil)
	require.NoError(t, err)
	defer set.Close()

	ts := byName(set.Tools())
	require.ElementsMatch(t, []string{"calc__add", "calc__note_write"}, slices.Collect(func(yield func(string) bool) {
		for n := range ts {
			if !yield(n) {
				return
			}
		}
	}))
	add := ts["calc__add"]
	assert.Contains(t, add.Spec().Description, "Adds two numbers.")
	assert.Contains(t, string(add.Spec().InputSchema), `"a"`)
	assert.Equal(t, tools.EffectRead, add.Classify(nil).Effect, "a read-only tool is a read")
	assert.Equal(t, tools.EffectNetwork, ts["calc__note_write"].Classify(nil).Effect, "any other reaches outside")
	assert.Equal(t, "calc__note_write", ts["calc__note_write"].Classify(nil).Key)

	assert.Equal(t, tools.Result{Content: "5"}, call(t, add, `{"a":2,"b":3}`))
	bad := call(t, add, `{"a":"two"}`)
	assert.True(t, bad.IsError, "%+v", bad)
}

// A stdio server runs inside the OS sandbox: at read-only it cannot write
// its working folder, at workspace-write it can.
func TestStdioServerInTheSandbox(t *testing.T) {
	box := sandboxtest.New(t, sandbox.Config{})
	for _, level := range []string{"read-only", "workspace-write"} {
		t.Run(level, func(t *testing.T) {
			dir := t.TempDir()
			dir, err := filepath.EvalSymlinks(dir)
			require.NoError(t, err)
			// The server's program must be inside what the sandbox shows.
			exe, err := os.Executable()
			require.NoError(t, err)
			prog := filepath.Join(dir, "mcp-server")
			copyFile(t, exe, prog)
			set, err := mcp.Start(t.Context(), mcp.Config{Servers: map[string]mcp.Server{
				"notes": {Command: []string{prog, serverArg}, Sandbox: level},
			}}, box, dir, nil)
			require.NoError(t, err)
			defer set.Close()
			ts := byName(set.Tools())
			require.Contains(t, ts, "notes__add")
			assert.Equal(t, "7", call(t, ts["notes__add"], `{"a":3,"b":4}`).Content)

			res := call(t, ts["notes__note_write"], `{"text":"hello"}`)
			_, statErr := os.Stat(filepath.Join(dir, "note.txt"))
			if level == "read-only" {
				assert.True(t, res.IsError, "a read-only server cannot write: %+v", res)
				assert.ErrorIs(t, statErr, os.ErrNotExist)
			} else {
				assert.False(t, res.IsError, "%+v", res)
				assert.NoError(t, statErr)
			}
		})
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	require.NoError(t, err)
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY, 0o755)
	require.NoError(t, err)
	_, err = io.Copy(out, in)
	require.NoError(t, err)
	require.NoError(t, out.Close())
}

func TestLoadRefusesBadFiles(t *testing.T) {
	for name, text := range map[string]string{
		"both":        "servers:\n  a:\n    command: [x]\n    url: http://x\n",
		"neither":     "servers:\n  a: {}\n",
		"bad name":    "servers:\n  a_b:\n    url: http://x\n",
		"bad sandbox": "servers:\n  a:\n    command: [x]\n    sandbox: full\n",
		"unknown key": "servers:\n  a:\n    url: http://x\n    urls: y\n",
	} {
		t.Run(name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "mcp.yaml")
			require.NoError(t, os.WriteFile(f, []byte(text), 0o644))
			_, err := mcp.Load(f)
			require.Error(t, err)
		})
	}
	f := filepath.Join(t.TempDir(), "mcp.yaml")
	require.NoError(t, os.WriteFile(f, []byte("servers:\n  calc:\n    url: http://127.0.0.1:1/mcp\n    headers: {Authorization: Bearer x}\n"), 0o644))
	c, err := mcp.Load(f)
	require.NoError(t, err)
	assert.Equal(t, "Bearer x", c.Servers["calc"].Headers["Authorization"])
}
