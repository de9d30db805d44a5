package builtin_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/tools"
	"github.com/agentwire/agentwire/internal/tools/builtin"
)

func patchArgs(body string) map[string]any {
	return map[string]any{"patch": "*** Begin Patch\n" + body + "*** End Patch\n"}
}

func TestApplyPatch(t *testing.T) {
	e := newEnv(t, builtin.Options{})
	require.NoError(t, os.WriteFile(filepath.Join(e.dir, "gone.txt"), []byte("bye\n"), 0o644))

	res := e.call("apply_patch", patchArgs(
		"*** Add File: docs/new.md\n+# New\n+\n+text\n"+
			"*** Delete File: gone.txt\n"+
			"*** Update File: a.txt\n@@\n alpha\n-beta\n+BETA\n gamma\n"+
			"*** Update File: sub/b.go\n*** Move to: pkg/b.go\n@@\n-package sub\n+package pkg\n@@ func B() int {\n-func B() int { return 2 }\n+func B() int { return 3 }\n*** End of File\n"))
	require.Equal(t, tools.Result{Content: "Success. Updated the following files:\nA docs/new.md\nD gone.txt\nM a.txt\nM sub/b.go -> pkg/b.go"}, res)
	require.Equal(t, "# New\n\ntext\n", e.file("docs/new.md"))
	require.False(t, e.exists("gone.txt"))
	require.Equal(t, "alpha\nBETA\ngamma\n", e.file("a.txt"))
	require.False(t, e.exists("sub/b.go"))
	require.Equal(t, "package pkg\n\nfunc B() int { return 3 }\n", e.file("pkg/b.go"))

	// Sections build on each other in order.
	res = e.call("apply_patch", patchArgs("*** Add File: n.txt\n+1\n*** Update File: n.txt\n-1\n+2\n"))
	require.False(t, res.IsError, res.Content)
	require.Equal(t, "2\n", e.file("n.txt"))

	p := "*** Begin Patch\n*** Update File: a.txt\n-alpha\n+ALPHA\n*** End Patch"
	require.Equal(t, tools.Class{Effect: tools.EffectEdit, Key: "apply_patch", Patch: p}, e.classify("apply_patch", map[string]any{"patch": p}))
}

func TestApplyPatchAllOrNothing(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{"bad hunk after good sections",
			"*** Add File: fresh.txt\n+new\n*** Update File: a.txt\n-alpha\n+ALPHA\n*** Update File: sub/b.go\n@@\n-func Z() {}\n+func Y() {}\n",
			"update sub/b.go: hunk 1 (patch line 8): cannot find these lines"},
		{"delete of a missing file", "*** Update File: a.txt\n-alpha\n+ALPHA\n*** Delete File: nope.txt\n", "delete nope.txt: no such file"},
		{"update of a missing file", "*** Add File: fresh.txt\n+x\n*** Update File: nope.txt\n-a\n+b\n", "update nope.txt: no such file"},
		{"move onto an existing file", "*** Update File: a.txt\n*** Move to: sub/b.go\n-alpha\n+ALPHA\n", "the destination exists"},
		{"escape in a later section", "*** Add File: fresh.txt\n+x\n*** Add File: ../escape.txt\n+x\n", "outside the working folder"},
		{"syntax", "*** Add File: fresh.txt\n+x\n*** Update File: a.txt\nalpha\n", "patch line 5"},
		{"add over a folder", "*** Add File: sub\n+x\n", "is a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, builtin.Options{})
			before := snapshot(t, e.base)
			res := e.call("apply_patch", patchArgs(tt.body))
			require.True(t, res.IsError, res.Content)
			require.Contains(t, res.Content, tt.want)
			require.Contains(t, res.Content, "no changes were made")
			require.Equal(t, before, snapshot(t, e.base))
		})
	}
}

// TestApplyPatchUndo makes a write fail half-way (a file, then a file
// inside a folder of the same name) and checks that what was written before
// it is put back.
func TestApplyPatchUndo(t *testing.T) {
	e := newEnv(t, builtin.Options{})
	before := snapshot(t, e.base)

	res := e.call("apply_patch", patchArgs("*** Update File: a.txt\n-alpha\n+ALPHA\n*** Add File: d\n+x\n*** Add File: d/x.txt\n+x\n"))
	require.True(t, res.IsError, res.Content)
	require.Contains(t, res.Content, "write d/x.txt")
	require.Contains(t, res.Content, "the changes already made were undone")
	require.Equal(t, before, snapshot(t, e.base))
}
