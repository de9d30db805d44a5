package scripted_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/llm"
	"github.com/agentwire/agentwire/internal/llm/scripted"
)

func TestParseErrorsNameFileAndLine(t *testing.T) {
	tests := []struct {
		name, yaml string
		line       int
		msg        string
	}{
		{"syntax", "rules:\n  - steps: []\n\t- steps: []\n", 3, "found character that cannot start any token"},
		{"misspelt key", "rules:\n  - steps:\n      - text: hi\n        tool_call: []\n", 4, `unknown field "tool_call"`},
		{"wrong type", "rules:\n  - steps:\n      - text: hi\n        chunk: many\n", 4, "cannot unmarshal"},
		{"bad duration", "pacing: {chunk_delay: 20}\nrules:\n  - steps: [{text: hi}]\n", 1, "not a duration"},
		{"bad regex", "rules:\n  - steps: [{text: a}]\n  - match: {regex: '(unclosed'}\n    steps: [{text: hi}]\n", 3, "match.regex"},
		{"empty match", "rules:\n  - match: {}\n    steps: [{text: hi}]\n", 2, "match needs contains"},
		{"no steps", "name: x\nrules:\n  - name: lonely\n    match: {contains: a}\n", 3, `rule "lonely": no steps`},
		{"empty step", "rules:\n  - steps:\n      - text: hi\n      - chunk: 3\n", 4, "rule 1 step 2: empty step"},
		{"error with calls", "rules:\n  - steps:\n      - error: boom\n        tool_calls: [{name: ls}]\n", 3, "takes no tool_calls"},
		{"bad finish", "rules:\n  - steps:\n      - text: hi\n        finish: done\n", 3, `finish "done"`},
		{"bad template", "rules:\n  - steps:\n      - text: hi\n      - text: '{{nope}}'\n", 4, `function "nope" not defined`},
		{"bad argument template", "rules:\n  - steps:\n      - tool_calls:\n          - name: ls\n            arguments: {path: '{{'}\n", 5, "unclosed action"},
		{"tool without name", "rules:\n  - steps:\n      - tool_calls:\n          - arguments: {}\n", 4, "no name"},
		{"list arguments", "rules:\n  - steps:\n      - tool_calls:\n          - {name: ls, arguments: [1]}\n", 4, "want a mapping"},
		{"no rules", "name: nothing\n", 0, "no rules"},
		{"empty file", "", 0, "empty scenario"},
		{"two documents", "rules: [{steps: [{text: a}]}]\n---\nrules: []\n", 2, "one YAML document"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bad.yaml")
			require.NoError(t, os.WriteFile(path, []byte(tt.yaml), 0o644))
			_, err := scripted.Load(path)
			require.Error(t, err)
			var pe *scripted.ParseError
			require.ErrorAs(t, err, &pe, "Load(%q) = %v", tt.yaml, err)
			assert.Equal(t, path, pe.File)
			assert.Equal(t, tt.line, pe.Line, "Load(%q) = %v", tt.yaml, err)
			assert.Contains(t, err.Error(), tt.msg)
			if tt.line > 0 {
				assert.True(t, strings.HasPrefix(err.Error(), path+":"), "error %q names file and line", err)
			}
		})
	}
}

func TestParseReportsEveryProblem(t *testing.T) {
	_, err := scripted.Parse("many.yaml", []byte(`
rules:
  - match: {regex: '('}
    steps: [{text: a}]
  - steps:
      - finish: nope
`))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "many.yaml:3: rule 1: match.regex")
	assert.Contains(t, err.Error(), "many.yaml:6: rule 2 step 1:")
}

func TestLoadDirectoryReportsTheBadFile(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.yaml"), []byte("rules: [{steps: [{text: a}]}]\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "b.yml"), []byte("rules:\n  - steps: [{txt: b}]\n"), 0o644))
	_, err := scripted.Load(dir)
	require.Error(t, err)
	assert.Contains(t, err.Error(), filepath.Join(dir, "b.yml")+":2: ")
}

func TestEveryTestdataScenarioLoads(t *testing.T) {
	files, err := filepath.Glob("testdata/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		s, err := scripted.Load(f)
		require.NoError(t, err, f)
		assert.NotEmpty(t, s.Name(), f)
	}
}

func TestMust(t *testing.T) {
	assert.Panics(t, func() { scripted.Must(scripted.Parse("x.yaml", []byte("rules: []"))) })
	assert.NotPanics(t, func() { scripted.Must(scripted.Parse("x.yaml", []byte("rules: [{steps: [{text: a}]}]"))) })
}

// FuzzParse feeds arbitrary scenario files to Parse and plays whatever
// parses: nothing may panic, and every stream must end in a finish or an
// error.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.yaml")
	files = append(files, "default.yaml")
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, "hello")
	}
	f.Add([]byte("rules:\n  - steps:\n      - text: '{{user_message}}'\n        tool_calls: [{name: x, arguments: {a: [1, {b: '{{last_tool_result}}'}]}}]\n"), "x")
	f.Fuzz(func(t *testing.T, data []byte, msg string) {
		s, err := scripted.Parse("fuzz.yaml", data)
		if err != nil {
			var pe *scripted.ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Parse error %v is not a *ParseError", err)
			}
			return
		}
		m := scripted.New(s, scripted.WithPacing(scripted.Pacing{}))
		conv := []llm.Message{{Role: llm.RoleUser, Content: msg}}
		for range 3 {
			var calls []llm.ToolCall
			finished, failed := false, false
			for c, err := range m.Stream(context.Background(), llm.Request{Messages: conv}) {
				if finished || failed {
					t.Fatal("chunk after the end of the stream")
				}
				switch {
				case err != nil:
					failed = true
				case c.Type == llm.ChunkFinish:
					finished = true
				case c.Type == llm.ChunkToolDone:
					calls = append(calls, llm.ToolCall{ID: c.CallID, Name: c.Name, Arguments: c.Arguments})
				}
			}
			if !finished && !failed {
				t.Fatal("stream ended without finish or error")
			}
			if failed || len(calls) == 0 {
				return
			}
			conv = append(conv, llm.Message{Role: llm.RoleAssistant, ToolCalls: calls})
			for _, c := range calls {
				conv = append(conv, llm.Message{Role: llm.RoleTool, ToolCallID: c.ID, Name: c.Name, Content: "result"})
			}
		}
	})
}
