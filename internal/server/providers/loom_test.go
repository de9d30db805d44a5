package providers_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/generated/loomapi"
	"github.com/agentwire/agentwire/internal/llm/llmtest"
	"github.com/agentwire/agentwire/internal/server/servertest"
)

// Loom runs against an OpenAI-compatible upstream: the working folder's
// SOUL.md and AGENTS.md are the system message of every call, the tool
// works in that folder, the stream carries the upstream's chunks and
// run_end its usage; a dup run works the same way.
func TestLoomRunsAgainstOpenAI(t *testing.T) {
	upstream := llmtest.NewServer(t,
		callReply("call_1", "read", map[string]any{"path": "notes.txt"}, 6, 300, 20),
		textReply("Your notes say: remember the milk.", 400, 9),
		textReply(`{"core_goal": "Answer", "key_constraints": [], "relevant_context": ""}`, 100, 10),
		textReply("1. Answer.", 110, 5),
		textReply("Done planning and acting.", 120, 6),
	)
	work := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(work, "team"), 0o755))
	for name, content := range map[string]string{
		"team/SOUL.md":   "You are the Loom tester.",
		"team/AGENTS.md": "Answer in one line.",
		"team/notes.txt": "remember the milk",
		"notes.txt":      "the wrong notes",
	} {
		require.NoError(t, os.WriteFile(filepath.Join(work, name), []byte(content), 0o644))
	}
	srv := start(t, openAIConfig(t, upstream.URL, work), servertest.Options{})
	c := loomClient{dial(t, "ws://"+srv.Addr("main")+"/loom")}

	r := runReq("o1", "react", "what do my notes say?")
	r.WorkingFolder = new("team")
	res := c.run(r)
	require.NotNil(t, res.end, "%+v", res.err)
	assert.Equal(t, "Your notes say: remember the milk.", res.end.Reply)
	assert.Equal(t, "Your notes say: remember the milk.", chunks(res.events))
	assert.Equal(t, &loomapi.TokenUsage{PromptTokens: 400, CompletionTokens: 9, TotalTokens: 409}, res.end.Usage)
	assert.Equal(t, &loomapi.TokenUsage{PromptTokens: 700, CompletionTokens: 29, TotalTokens: 729}, res.end.TotalUsage)
	var ended loomapi.ToolEndEvent
	for _, e := range res.events {
		if v, ok := e.(loomapi.ToolEndEvent); ok {
			ended = v
		}
	}
	require.NotNil(t, ended.CallID)
	assert.Equal(t, "call_1", *ended.CallID)
	assert.Contains(t, ended.Result, "remember the milk", "the tool reads in the run's working folder")

	r = runReq("o2", "dup", "answer me")
	r.WorkingFolder = new("team")
	res = c.run(r)
	require.NotNil(t, res.end, "%+v", res.err)
	assert.Equal(t, "Done planning and acting.", res.end.Reply)
	assert.Equal(t, &loomapi.TokenUsage{PromptTokens: 330, CompletionTokens: 21, TotalTokens: 351}, res.end.TotalUsage)

	reqs := upstream.Requests()
	require.Len(t, reqs, 5)
	for i, req := range reqs {
		first := req.JSON(t)["messages"].([]any)[0].(map[string]any)
		assert.Equal(t, "system", first["role"], "request %d", i)
		assert.True(t, strings.HasPrefix(first["content"].(string), "You are the Loom tester.\n\nAnswer in one line."),
			"request %d: SOUL.md then AGENTS.md open the system message: %q", i, first["content"])
	}
}

// loomClient is a Loom client: it checks every frame it sends and
// receives against the document.
type loomClient struct{ socket }

func runReq(id, agent, message string) loomapi.RunRequest {
	return loomapi.RunRequest{Type: loomapi.TypeRun, ID: &id, Agent: agent, Message: message}
}

// loomRun is what a run sent: its stream events, then its run_end or its
// error.
type loomRun struct {
	events []loomapi.ProtocolEventValue
	end    *loomapi.RunEndResponse
	err    *loomapi.ErrorResponse
}

// run sends a run request and reads its frames to its end; every frame
// must be the run's.
func (c loomClient) run(r loomapi.RunRequest) loomRun {
	c.t.Helper()
	b, err := loomapi.Encode(r)
	require.NoError(c.t, err)
	c.write(b, loomapi.ValidateInbound)
	var res loomRun
	for {
		b, err := c.read()
		require.NoError(c.t, err)
		m, err := loomapi.DecodeOutbound(b)
		require.NoError(c.t, err, "DecodeOutbound(%s)", b)
		switch f := m.(type) {
		case loomapi.RunStreamEventResponse:
			require.Equal(c.t, *r.ID, f.ID, "every frame of a run carries its id")
			res.events = append(res.events, f.Event.Value)
		case loomapi.RunEndResponse:
			require.Equal(c.t, *r.ID, f.ID)
			res.end = &f
			return res
		case loomapi.ErrorResponse:
			res.err = &f
			return res
		default:
			c.t.Fatalf("a frame of no run: %s", b)
		}
	}
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
