package tools_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/tools"
)

func TestParsePatch(t *testing.T) {
	p, err := tools.ParsePatch(`*** Begin Patch
*** Add File: docs/new.md
+# Title
+
+text
*** Delete File: old.txt
*** Update File: src/app.ts
*** Move to: src/server.ts
@@ -1,3 +1,4 @@
 import express from 'express';
+import cors from 'cors';
 const app = express();
@@ function main() {
-  old();
+  new();

*** End of File
*** Update File: b.txt
-x
+y
*** End Patch
`)
	require.NoError(t, err)
	require.Equal(t, []tools.FilePatch{
		{Op: tools.PatchAdd, Path: "docs/new.md", Content: "# Title\n\ntext\n"},
		{Op: tools.PatchDelete, Path: "old.txt"},
		{Op: tools.PatchUpdate, Path: "src/app.ts", MoveTo: "src/server.ts", Hunks: []tools.Hunk{
			{Old: []string{"import express from 'express';", "const app = express();"},
				New:  []string{"import express from 'express';", "import cors from 'cors';", "const app = express();"},
				Line: 9},
			{Anchor: "function main() {", Old: []string{"  old();", ""}, New: []string{"  new();", ""}, AtEOF: true, Line: 13},
		}},
		{Op: tools.PatchUpdate, Path: "b.txt", Hunks: []tools.Hunk{{Old: []string{"x"}, New: []string{"y"}, Line: 19}}},
	}, p.Files)
}

func TestParsePatchErrors(t *testing.T) {
	tests := []struct{ patch, want string }{
		{"", "first line must be"},
		{"*** Add File: x\n+a\n*** End Patch", "first line must be"},
		{"*** Begin Patch\n*** Add File: x\n+a\n", `missing "*** End Patch"`},
		{"*** Begin Patch\n*** End Patch", "no file sections"},
		{"*** Begin Patch\n*** Add File: x\nno plus\n*** End Patch", "patch line 3: in Add File x"},
		{"*** Begin Patch\n*** Update File: x\n*** End Patch", "patch line 2: Update File x has no changes"},
		{"*** Begin Patch\n*** Update File: x\n@@\n@@\n-a\n*** End Patch", "patch line 3: Update File x: hunk 1 is empty"},
		{"*** Begin Patch\n*** Update File: x\n-a\n?b\n*** End Patch", "patch line 4: Update File x: a hunk line must start"},
		{"*** Begin Patch\n*** Update File: x\n-a\n*** End of File\n+b\n*** End Patch", "patch line 5"},
		{"*** Begin Patch\n*** Frobnicate File: x\n*** End Patch", "patch line 2: expected a file section"},
		{"*** Begin Patch\n*** Delete File: \n*** End Patch", "patch line 2: a file section without a path"},
		{"*** Begin Patch\n*** Update File: x\n*** Move to: \n-a\n*** End Patch", "without a path"},
		{"*** Begin Patch\n*** Delete File: x\n*** End Patch\nmore", "text after"},
	}
	for _, tt := range tests {
		_, err := tools.ParsePatch(tt.patch)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParsePatch(%q) error = %v, want one containing %q", tt.patch, err, tt.want)
		}
	}
}

func TestFilePatchApply(t *testing.T) {
	const src = "package main\n\nfunc a() {\n\treturn 1\n}\n\nfunc b() {\n\treturn 1\n}\n"
	tests := []struct {
		name, patch, want, err string
	}{
		{
			name:  "anchor picks the second match",
			patch: "@@ func b() {\n-\treturn 1\n+\treturn 2\n",
			want:  "package main\n\nfunc a() {\n\treturn 1\n}\n\nfunc b() {\n\treturn 2\n}\n",
		},
		{
			name:  "without an anchor the first match",
			patch: "-\treturn 1\n+\treturn 0\n",
			want:  "package main\n\nfunc a() {\n\treturn 0\n}\n\nfunc b() {\n\treturn 1\n}\n",
		},
		{
			name:  "two hunks in order",
			patch: "@@\n-\treturn 1\n+\treturn 10\n@@\n-\treturn 1\n+\treturn 20\n",
			want:  "package main\n\nfunc a() {\n\treturn 10\n}\n\nfunc b() {\n\treturn 20\n}\n",
		},
		{
			name:  "end of file",
			patch: "@@\n }\n+\n+func c() {}\n*** End of File\n",
			want:  src + "\nfunc c() {}\n",
		},
		{
			name:  "insertion after an anchor",
			patch: "@@ package main\n+\n+import \"fmt\"\n",
			want:  "package main\n\nimport \"fmt\"\n\nfunc a() {\n\treturn 1\n}\n\nfunc b() {\n\treturn 1\n}\n",
		},
		{
			name:  "trailing blanks in the file do not matter",
			patch: "-func a() {   \n+func a() int {\n",
			want:  "package main\n\nfunc a() int {\n\treturn 1\n}\n\nfunc b() {\n\treturn 1\n}\n",
		},
		{
			name:  "indentation differences are forgiven last",
			patch: "- return 1\n+\treturn 3\n",
			want:  "package main\n\nfunc a() {\n\treturn 3\n}\n\nfunc b() {\n\treturn 1\n}\n",
		},
		{
			name:  "anchor that is the changed line",
			patch: "@@ func b() {\n-func b() {\n+func b() int {\n",
			want:  "package main\n\nfunc a() {\n\treturn 1\n}\n\nfunc b() int {\n\treturn 1\n}\n",
		},
		{
			name:  "anchor given by its start",
			patch: "@@ func b\n-\treturn 1\n+\treturn 2\n",
			want:  "package main\n\nfunc a() {\n\treturn 1\n}\n\nfunc b() {\n\treturn 2\n}\n",
		},
		{
			name:  "missing lines",
			patch: "@@\n-\treturn 42\n+\treturn 0\n",
			err:   "f.go: hunk 1 (patch line 3): cannot find these lines:\n    \treturn 42",
		},
		{
			name:  "missing anchor",
			patch: "@@ func z() {\n-\treturn 1\n+\treturn 0\n",
			err:   `f.go: hunk 1 (patch line 3): cannot find the line "func z() {"`,
		},
		{
			name:  "second hunk cannot go back",
			patch: "@@ func b() {\n-\treturn 1\n+\treturn 2\n@@ func a() {\n-\treturn 1\n+\treturn 2\n",
			err:   "hunk 2 (patch line 6)",
		},
		{
			name:  "end of file must be the end",
			patch: "@@\n-func a() {\n+func a() int {\n*** End of File\n",
			err:   "at the end of the file",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := tools.ParsePatch("*** Begin Patch\n*** Update File: f.go\n" + tt.patch + "*** End Patch")
			require.NoError(t, err)
			got, err := p.Files[0].Apply(src)
			if tt.err != "" {
				require.ErrorContains(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func FuzzParsePatch(f *testing.F) {
	f.Add("*** Begin Patch\n*** Add File: a\n+x\n*** End Patch")
	f.Add("*** Begin Patch\n*** Update File: a\n*** Move to: b\n@@ x\n a\n-b\n+c\n*** End of File\n*** End Patch")
	f.Add("*** Begin Patch\n*** Delete File: a\n*** End Patch\n")
	f.Fuzz(func(t *testing.T, text string) {
		p, err := tools.ParsePatch(text)
		if err != nil {
			return
		}
		for _, fp := range p.Files {
			if fp.Path == "" {
				t.Fatalf("ParsePatch(%q) gave a section without a path", text)
			}
			if fp.Op == tools.PatchUpdate {
				fp.Apply("a\nb\nc\n") // must not panic
			}
		}
	})
}

func TestApplyPatchCommand(t *testing.T) {
	const patch = "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch"
	for _, line := range []string{
		"apply_patch <<'EOF'\n" + patch + "\nEOF",
		"apply_patch <<'EOF'\n" + patch + "\nEOF\n",
		"  apply_patch <<\"EOF\"\n" + patch + "\nEOF  \n\n",
		"apply_patch <<EOF\n" + patch + "\nEOF",
		"apply_patch <<-PATCH\n" + patch + "\nPATCH",
		"apply_patch '" + patch + "'",
		tools.ApplyPatchHeredoc(patch),
	} {
		got, ok := tools.ApplyPatchCommand(line)
		if !ok || got != patch {
			t.Errorf("ApplyPatchCommand(%q) = %q, %v, want the patch", line, got, ok)
		}
	}
	for _, line := range []string{
		"apply_patch",
		"apply_patchx <<EOF\n" + patch + "\nEOF",
		"cd src && apply_patch <<EOF\n" + patch + "\nEOF",
		"apply_patch <<EOF\n" + patch + "\nEOF\nrm -rf x",
		"apply_patch <<EOF\n" + patch,
		"apply_patch <<< 'x'",
		"apply_patch a b",
		"echo apply_patch",
	} {
		if got, ok := tools.ApplyPatchCommand(line); ok {
			t.Errorf("ApplyPatchCommand(%q) = %q, true, want not recognised", line, got)
		}
	}
	// A patch that holds the usual delimiter gets another one.
	tricky := "*** Begin Patch\n*** Add File: EOF\n+EOF\n*** End Patch"
	if got, ok := tools.ApplyPatchCommand(tools.ApplyPatchHeredoc(tricky)); !ok || got != tricky {
		t.Errorf("ApplyPatchCommand(ApplyPatchHeredoc(%q)) = %q, %v", tricky, got, ok)
	}
}

func FuzzApplyPatchCommand(f *testing.F) {
	for _, s := range []string{
		"apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: a\n+x\n*** End Patch\nEOF",
		"apply_patch <<EOF\nx\nEOF\n\n",
		"apply_patch '*** Begin Patch'",
		"apply_patch <<-\"P\"\n\nP",
		"apply_patch <<",
		"ls -la",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		patch, ok := tools.ApplyPatchCommand(line)
		if !ok {
			return
		}
		// What was recognised survives a round trip through the form
		// agentwire writes.
		again, ok := tools.ApplyPatchCommand(tools.ApplyPatchHeredoc(patch))
		if want := strings.TrimRight(patch, "\n"); !ok || again != want {
			t.Fatalf("ApplyPatchCommand(ApplyPatchHeredoc(%q)) = %q, %v, want %q", patch, again, ok, want)
		}
	})
}
