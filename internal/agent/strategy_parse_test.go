package agent

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var graphCases = []struct {
	text string
	err  string // "" when valid
}{
	{`{"nodes": [{"id": "a", "task": "A"}, {"id": "b", "task": "B", "deps": ["a"]}]}`, ""},
	{"Here is the plan:\n```json\n{\"nodes\": [{\"id\": \"a\", \"task\": \"A\", \"deps\": []}, {\"id\": \"b\", \"task\": \"B\", \"deps\": []}]}\n```", ""},
	{`no plan`, "the answer holds no JSON object"},
	{`{"nodes": "a"}`, "the answer is not the JSON object asked for"},
	{`{"nodes": [{"id": "a", "task": "A"}]}`, "the plan has 1 sub-tasks; it must have 2 to 8"},
	{`{"nodes": [{"id": " ", "task": "A"}, {"id": "b", "task": "B"}]}`, "sub-task 1 has no id"},
	{`{"nodes": [{"id": "a", "task": ""}, {"id": "b", "task": "B"}]}`, `sub-task "a" has no task`},
	{`{"nodes": [{"id": "a", "task": "A"}, {"id": "a", "task": "B"}]}`, `two sub-tasks have the id "a"`},
	{`{"nodes": [{"id": "a", "task": "A", "deps": ["a"]}, {"id": "b", "task": "B"}]}`, `sub-task "a" depends on itself`},
	{`{"nodes": [{"id": "a", "task": "A", "deps": ["z"]}, {"id": "b", "task": "B"}]}`, `sub-task "a" depends on "z", which is not in the plan`},
	{`{"nodes": [{"id": "a", "task": "A", "deps": ["c"]}, {"id": "b", "task": "B", "deps": ["a"]}, {"id": "c", "task": "C", "deps": ["b"]}]}`,
		"the dependencies form a cycle: a → c → b → a"},
	{`{"nodes": [{"id": "x", "task": "X"}, {"id": "a", "task": "A", "deps": ["x", "b"]}, {"id": "b", "task": "B", "deps": ["a"]}]}`,
		"the dependencies form a cycle: a → b → a"},
}

func TestParseGraph(t *testing.T) {
	for _, tc := range graphCases {
		nodes, err := parseGraph(tc.text, minPlanNodes, maxPlanNodes)
		if tc.err == "" {
			require.NoError(t, err, "parseGraph(%q)", tc.text)
			assert.Len(t, nodes, 2)
			continue
		}
		require.Error(t, err, "parseGraph(%q)", tc.text)
		assert.True(t, errors.As(err, new(*badOutput)), "parseGraph(%q) = %v, want a badOutput", tc.text, err)
		assert.True(t, strings.HasPrefix(err.Error(), tc.err), "parseGraph(%q) = %q, want %q", tc.text, err, tc.err)
	}
}

func TestParseUnderstanding(t *testing.T) {
	for text, want := range map[string]string{
		`{"core_goal": "g", "key_constraints": [], "relevant_context": ""}`:          "",
		`{"core_goal": "g", "key_constraints": ["a", "b"], "relevant_context": "c"}`: "",
		`{"key_constraints": [], "relevant_context": ""}`:                            "core_goal is missing or empty",
		`{"core_goal": "g", "relevant_context": ""}`:                                 "key_constraints is missing",
		`{"core_goal": "g", "key_constraints": "none", "relevant_context": ""}`:      "key_constraints is not a list of strings",
		`{"core_goal": "g", "key_constraints": []}`:                                  "relevant_context is missing",
	} {
		var u understanding
		err := parseUnderstanding(text, &u)
		if want == "" {
			assert.NoError(t, err, "parseUnderstanding(%q)", text)
			assert.Equal(t, "g", u.CoreGoal)
			continue
		}
		require.Error(t, err, "parseUnderstanding(%q)", text)
		assert.True(t, strings.HasPrefix(err.Error(), want), "parseUnderstanding(%q) = %q, want %q", text, err, want)
	}
}

// FuzzParseGraph checks that any answer either fails as bad output or is
// a graph the scheduler can run: unique ids, known dependencies, and an
// order in which every node comes after its dependencies.
func FuzzParseGraph(f *testing.F) {
	for _, tc := range graphCases {
		f.Add(tc.text)
	}
	f.Fuzz(func(t *testing.T, text string) {
		nodes, err := parseGraph(text, minPlanNodes, maxPlanNodes)
		if err != nil {
			if !errors.As(err, new(*badOutput)) {
				t.Fatalf("parseGraph(%q) = %v, not a badOutput", text, err)
			}
			return
		}
		done := map[string]bool{}
		for progress := true; progress; {
			progress = false
			for _, n := range nodes {
				if done[n.ID] {
					continue
				}
				ready := true
				for _, d := range n.Deps {
					ready = ready && done[d]
				}
				if ready {
					done[n.ID], progress = true, true
				}
			}
		}
		if len(done) != len(nodes) {
			t.Fatalf("parseGraph(%q) accepted a graph that cannot run to its end: %+v", text, nodes)
		}
	})
}
