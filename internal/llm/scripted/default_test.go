package scripted_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/llm"
	"github.com/agentwire/agentwire/internal/llm/scripted"
)

func defaultModel() *scripted.Model {
	return scripted.New(scripted.Default(), scripted.WithPacing(scripted.Pacing{}))
}

func TestDefaultSaysHowToConfigure(t *testing.T) {
	got := play(t, defaultModel(), req(user("Hello, who are you?")))
	require.NoError(t, got.err)
	for _, want := range []string{
		"no language model is configured",
		"OPENAI_API_KEY", "OPENAI_BASE_URL", "http://localhost:11434/v1", "--model llama3.1",
		"ANTHROPIC_API_KEY", "GEMINI_API_KEY", "--llm", "--scenario FILE",
	} {
		assert.Contains(t, got.text, want)
	}
	assert.Equal(t, llm.FinishStop, got.finish)
}

// TestDefaultDemos plays every demo the default reply names, answering
// each tool call, and checks that each one is a rule of its own that ends.
func TestDefaultDemos(t *testing.T) {
	m := defaultModel()
	fallback := play(t, m, req(user("?"))).text
	names := regexp.MustCompile(`"((?:demo|list) [a-z]+)"`).FindAllStringSubmatch(fallback, -1)
	require.Len(t, names, 10, "the default reply lists the demos: %s", fallback)

	for _, n := range names {
		name := n[1]
		conv := []llm.Message{user(name)}
		first := play(t, m, req(conv...))
		assert.NotEqual(t, fallback, first.text, "%q fell through to the default reply", name)
		last := first
		for turns := 0; last.err == nil && len(last.calls) > 0; turns++ {
			require.Less(t, turns, 3, "%q does not end", name)
			conv = append(conv, answered(last))
			for _, c := range last.calls {
				conv = append(conv, toolResult(c.id, c.name, "answer for "+c.name, false))
			}
			last = play(t, m, req(conv...))
		}
		if name == "demo error" {
			assert.Error(t, last.err, name)
		} else {
			assert.NoError(t, last.err, name)
			assert.Equal(t, llm.FinishStop, last.finish, name)
			assert.NotEmpty(t, last.text, name)
		}
	}
}

func TestDefaultListsFiles(t *testing.T) {
	m := defaultModel()
	for _, msg := range []string{"ls", "What's in the folder?", "list the files please", "Which FILES do I have?"} {
		conv := []llm.Message{user(msg)}
		t1 := play(t, m, req(conv...))
		require.NoError(t, t1.err)
		require.Len(t, t1.calls, 1, "Stream(%q)", msg)
		assert.Equal(t, "ls", t1.calls[0].name)
		assert.JSONEq(t, `{"path":"."}`, t1.calls[0].args)
		assert.Equal(t, llm.FinishToolCalls, t1.finish)
		conv = append(conv, answered(t1))

		t2 := play(t, m, req(append(conv, toolResult(t1.calls[0].id, "ls", "README.md\nsrc/\ngo.mod\n", false))...))
		assert.Contains(t, t2.text, "The working folder holds 3 entries:")
		assert.Contains(t, t2.text, "README.md\nsrc/\ngo.mod")
		assert.Equal(t, llm.FinishStop, t2.finish)

		t2 = play(t, m, req(append(conv, toolResult(t1.calls[0].id, "ls", "only.txt", false))...))
		assert.Contains(t, t2.text, "holds 1 entry:")

		t2 = play(t, m, req(append(conv, toolResult(t1.calls[0].id, "ls", "", false))...))
		assert.Contains(t, t2.text, "The working folder is empty")
		// What the ls tool answers for an empty folder is no entry.
		t2 = play(t, m, req(append(conv, toolResult(t1.calls[0].id, "ls", "(. is empty)", false))...))
		assert.Contains(t, t2.text, "The working folder is empty")
		assert.NotContains(t, t2.text, "holds")

		t2 = play(t, m, req(append(conv, toolResult(t1.calls[0].id, "ls", "permission denied", true))...))
		assert.Contains(t, t2.text, "I couldn't list the working folder: permission denied")
	}

	// Words that merely contain "ls" are not a request to list files.
	got := play(t, m, req(user("tell me about models")))
	assert.Empty(t, got.calls)
}

func TestDefaultDemoCalls(t *testing.T) {
	m := defaultModel()
	tests := []struct {
		msg, tool, args string
	}{
		{"demo approval", "bash", `{"command":"touch approved.txt"}`},
		{"demo input", "ask_user", `{"prompt":"What's your name?","timeout_seconds":300}`},
		{"demo secret", "ask_user", `{"prompt":"Type a pretend API key","secret":true,"timeout_seconds":300}`},
		{"demo ui", "ui", `{"component":"choice","payload":{"title":"Pick a colour","options":["red","green","blue"]}}`},
	}
	for _, tt := range tests {
		got := play(t, m, req(user(tt.msg)))
		require.Len(t, got.calls, 1, tt.msg)
		assert.Equal(t, tt.tool, got.calls[0].name, tt.msg)
		assert.JSONEq(t, tt.args, got.calls[0].args, tt.msg)
	}

	tools := play(t, m, req(user("please demo tools")))
	require.Len(t, tools.calls, 2)
	assert.Equal(t, []string{"ls", "read"}, []string{tools.calls[0].name, tools.calls[1].name})

	reasoning := play(t, m, req(user("demo reasoning")))
	assert.NotEmpty(t, reasoning.reasoning)
	assert.NotEmpty(t, reasoning.text)

	long := play(t, m, req(user("demo long")))
	assert.Greater(t, len(long.texts), 200)

	denied := play(t, m, req(user("demo approval"), assistant("", llm.ToolCall{ID: "c1", Name: "bash", Arguments: "{}"}),
		toolResult("c1", "bash", "The user denied this call.", true)))
	assert.Equal(t, "The command did not run.", denied.text, "the denial is not repeated in the reply")
}

func TestDefaultExplainsCalls(t *testing.T) {
	// The question the agent asks when a person picks "explain".
	q := "Before the user approves it, explain in two or three sentences what this tool call does and why it is needed, and any risk it carries.\n\nTool: bash\nArguments: {\"command\":\"touch approved.txt\"}"
	got := play(t, defaultModel(), req(user("demo approval"), user(q)))
	assert.Contains(t, got.text, "this explanation is canned")
	assert.Empty(t, got.calls)
}

// The context manager's summary request gets a structured stand-in, even
// when the quoted conversation holds a demo's phrase.
func TestDefaultSummarises(t *testing.T) {
	r := req(user("### User\nplease demo tools\n\n### Assistant\nListing the files."))
	r.System = "You are compacting the conversation of an AI coding agent with its user."
	got := play(t, defaultModel(), r)
	require.NoError(t, got.err)
	assert.Regexp(t, regexp.MustCompile(`(?s)^## Goals\n.+## Decisions\n.+## Files touched\n.+## Open tasks\n`), got.text)
	assert.Empty(t, got.calls)
}

// TestDefaultAnswersRustNews: the prompt of the original Loom server's
// e2e_run_react gets a reply in one turn that mentions Rust, which that
// test requires of the run_end's reply.
func TestDefaultAnswersRustNews(t *testing.T) {
	m := defaultModel()
	fallback := play(t, m, req(user("?"))).text
	got := play(t, m, req(user("Search the web for recent Rust programming language news and summarize one or two items in a short reply.")))
	require.NoError(t, got.err)
	assert.NotEqual(t, fallback, got.text)
	assert.Contains(t, strings.ToLower(got.text), "rust")
	assert.Empty(t, got.calls)
	assert.Equal(t, llm.FinishStop, got.finish)
}
