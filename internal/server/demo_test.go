package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/config"
	"github.com/agentwire/agentwire/internal/sse"
)

// internalName is a canonical event name (message.delta, tool.exec.started,
// ...): agentwire's own vocabulary, which no protocol's user knows.
var internalName = regexp.MustCompile(`\b(message|reasoning|tool|run|input|ui)\.(started|delta|completed|requested|resolved|output|failed|cancelled|provided|timed_out|call|exec)\b`)

// TestDemoPromptsReadRight plays every demo prompt docs/SCENARIOS.md lists,
// and "list the files", over the threads protocol (which cannot ask a
// person anything) on an empty working folder, with the built-in scenario:
// each run ends, its reply names no internal event, an empty folder is
// said to be empty, and a refusal is said once.
func TestDemoPromptsReadRight(t *testing.T) {
	doc, err := os.ReadFile("../../docs/SCENARIOS.md")
	require.NoError(t, err)
	prompts := []string{"list the files"}
	for _, m := range regexp.MustCompile("(?m)^\\| `(demo [a-z_]+)` \\|").FindAllStringSubmatch(string(doc), -1) {
		prompts = append(prompts, m[1])
	}
	require.GreaterOrEqual(t, len(prompts), 10, "the demo table of docs/SCENARIOS.md")

	cfg, err := config.Parse([]string{"--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--workdir", t.TempDir()},
		func(string) string { return "" }, io.Discard)
	require.NoError(t, err)
	ts := startServer(t, cfg, Options{})
	for _, prompt := range prompts {
		t.Run(prompt, func(t *testing.T) {
			resp, err := http.Post("http://"+ts.Addr("main")+"/api/v1/threads/"+uuid.NewString(), "application/json",
				strings.NewReader(`{"text":"`+prompt+`"}`))
			require.NoError(t, err)
			defer resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode)
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			r := sse.NewReader(bytes.NewReader(body))
			var reply strings.Builder
			var all []string
			ended := ""
			for {
				e, err := r.Next()
				if err != nil {
					break
				}
				all = append(all, e.Data)
				switch e.Type {
				case "agent_text":
					var d struct{ Chunk string }
					require.NoError(t, json.Unmarshal([]byte(e.Data), &d))
					reply.WriteString(d.Chunk)
				case "done", "error":
					ended = e.Type
				}
			}
			require.NotEmpty(t, ended, "the run did not end: %s", body)
			if prompt == "demo error" {
				assert.Equal(t, "error", ended)
			} else {
				assert.Equal(t, "done", ended, "%s", body)
			}
			assert.Empty(t, internalName.FindAllString(reply.String(), -1), "the reply speaks of agentwire's internal events")
			assert.NotContains(t, reply.String(), "holds 1 entry", "an empty folder counted as an entry")
			if prompt == "list the files" {
				assert.Contains(t, reply.String(), "empty")
			}
			refusals := strings.Count(strings.Join(all, "\n"), "needs approval")
			assert.LessOrEqual(t, refusals, 1, "a refusal said more than once: %s", body)
		})
	}
}
