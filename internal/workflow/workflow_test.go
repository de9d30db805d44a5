package workflow_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/workflow"
)

func TestBuiltins(t *testing.T) {
	c, err := workflow.New("")
	require.NoError(t, err)
	assert.Equal(t, []string{"default", "dev-team"}, c.Names())
	assert.Empty(t, c.Check())

	def, err := c.Lookup(workflow.DefaultName)
	require.NoError(t, err)
	assert.Equal(t, "builtin:default", def.Source)
	assert.Equal(t, workflow.RoundRobin, def.Selection)
	assert.Equal(t, workflow.DefaultMaxRounds, def.MaxRounds)
	assert.Equal(t, workflow.DefaultKeyword, def.Keyword)
	require.Len(t, def.Agents, 1)
	assert.Equal(t, "assistant", def.Agents[0].Name)
	assert.Nil(t, def.Agents[0].Tools, "no tools list: every tool")
	assert.Empty(t, def.Agents[0].System, "the server's system prompt")

	dev, err := c.Lookup("dev-team")
	require.NoError(t, err)
	assert.Equal(t, []string{"planner", "coder", "reviewer"}, dev.Names())
	assert.Equal(t, "reviewer", dev.After)
	assert.Equal(t, 6, dev.MaxRounds)
	assert.Equal(t, []string{"ls", "glob", "grep", "read"}, dev.Agents[0].Tools)

	// Lookups return copies: a caller cannot change the catalog.
	dev.Agents[0].Tools[0] = "bash"
	again, err := c.Lookup("dev-team")
	require.NoError(t, err)
	assert.Equal(t, "ls", again.Agents[0].Tools[0])
}

func TestLookupFolder(t *testing.T) {
	c, err := workflow.New("testdata/ok")
	require.NoError(t, err)
	assert.Equal(t, []string{"default", "dev-team", "review"}, c.Names())

	w, err := c.Lookup("review")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join("testdata", "ok", "review.yaml"), w.Source)
	assert.Equal(t, workflow.Manual, w.Selection)
	assert.Equal(t, 4, w.MaxRounds)
	assert.Equal(t, 30, w.SelectionTimeoutSeconds)
	assert.Empty(t, w.Keyword, `keyword "" turns the keyword off`)
	require.Len(t, w.Agents, 2)
	assert.NotNil(t, w.Agents[0].Tools)
	assert.Empty(t, w.Agents[0].Tools, "tools: [] is no tools")
	assert.Equal(t, "small-model", w.Agents[0].Model)
	assert.Nil(t, w.Agents[1].Tools)
	a, ok := w.Agent("critic")
	assert.True(t, ok, "agent names match ignoring case")
	assert.Equal(t, "Critic", a.Name)

	w, err = c.Lookup("dev-team")
	require.NoError(t, err, "a .yml file replaces the built-in workflow of its name")
	assert.Equal(t, []string{"solo"}, w.Names())
	assert.Equal(t, workflow.DefaultSelectionTimeout, w.SelectionTimeoutSeconds)
}

func TestLookupNotFound(t *testing.T) {
	c, err := workflow.New("testdata/ok")
	require.NoError(t, err)
	for _, name := range []string{"missing", "", "../broken/typo", "ok/review", "review.yaml", ".hidden"} {
		_, err := c.Lookup(name)
		assert.ErrorIs(t, err, workflow.ErrNotFound, "Lookup(%q)", name)
		assert.NotErrorIs(t, err, workflow.ErrInvalid, "Lookup(%q)", name)
	}
}

func TestNewFolderMustExist(t *testing.T) {
	_, err := workflow.New(filepath.Join(t.TempDir(), "missing"))
	assert.Error(t, err)
	f := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(f, nil, 0o644))
	_, err = workflow.New(f)
	assert.Error(t, err)
}

// TestLoadErrors checks that a file that does not load says which file,
// which field and which line.
func TestLoadErrors(t *testing.T) {
	c, err := workflow.New("testdata/broken")
	require.NoError(t, err, "broken files do not stop the catalog")
	for _, tc := range []struct {
		name string
		want []workflow.Problem
	}{
		{"typo", []workflow.Problem{
			{Path: "/speaker_selection", Line: 1},
			{Path: "/max_rounds", Line: 2},
			{Path: "/agents/0", Line: 4},
		}},
		{"dupes", []workflow.Problem{
			{Path: "/agents/1/name", Line: 5},
			{Path: "/agents/2/name", Line: 6},
			{Path: "/termination/after", Line: 2},
		}},
		{"syntax", []workflow.Problem{{}}},
		{"empty", []workflow.Problem{{}}},
		{"noagents", []workflow.Problem{{Path: "/agents", Line: 2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Lookup(tc.name)
			require.ErrorIs(t, err, workflow.ErrInvalid)
			assert.NotErrorIs(t, err, workflow.ErrNotFound)
			var le *workflow.LoadError
			require.True(t, errors.As(err, &le), "%T", err)
			assert.Equal(t, tc.name, le.Name)
			assert.Equal(t, tc.name+".yaml", le.File)
			assert.Contains(t, err.Error(), tc.name+".yaml")
			require.Len(t, le.Problems, len(tc.want), "%v", err)
			for i, p := range le.Problems {
				assert.Equal(t, tc.want[i].Path, p.Path, "problem %d: %v", i, p)
				assert.Equal(t, tc.want[i].Line, p.Line, "problem %d: %v", i, p)
				assert.NotEmpty(t, p.Message)
			}
		})
	}
	_, err = c.Lookup("typo")
	assert.Contains(t, err.Error(), "sytem", "the unknown key is named")
	assert.Contains(t, err.Error(), "round_robin", "the allowed values are listed")
	_, err = c.Lookup("dupes")
	assert.Contains(t, err.Error(), "reserved")
	assert.Contains(t, err.Error(), "unique")
	_, err = c.Lookup("syntax")
	assert.Contains(t, err.Error(), "syntax.yaml: line ")
	assert.Len(t, c.Check(), 5, "Check lists every broken workflow")
}

func TestParseTermination(t *testing.T) {
	w, err := workflow.Parse("x", "x.yaml", []byte("termination: {after: B, keyword: DONE!}\nagents: [{name: a}, {name: b}]\n"))
	require.NoError(t, err)
	assert.Equal(t, "b", w.After, "after is spelt as the agent is")
	assert.Equal(t, "DONE!", w.Keyword)
}

// FuzzParse checks that Parse never panics and that what it accepts keeps
// the promises of Workflow.
func FuzzParse(f *testing.F) {
	for _, dir := range []string{"testdata/ok", "testdata/broken", "builtin"} {
		entries, err := os.ReadDir(dir)
		require.NoError(f, err)
		for _, e := range entries {
			data, err := os.ReadFile(filepath.Join(dir, e.Name()))
			require.NoError(f, err)
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		w, err := workflow.Parse("fuzz", "fuzz.yaml", data)
		if err != nil {
			var le *workflow.LoadError
			require.True(t, errors.As(err, &le), "%T: %v", err, err)
			require.NotEmpty(t, le.Problems)
			return
		}
		require.NotEmpty(t, w.Agents)
		require.GreaterOrEqual(t, w.MaxRounds, 1)
		require.Contains(t, []workflow.Selection{workflow.RoundRobin, workflow.Auto, workflow.Manual}, w.Selection)
		seen := map[string]bool{}
		for _, a := range w.Agents {
			k := strings.ToLower(a.Name)
			require.False(t, seen[k], "duplicate agent %q", a.Name)
			seen[k] = true
		}
		if w.After != "" {
			_, ok := w.Agent(w.After)
			require.True(t, ok)
		}
	})
}
