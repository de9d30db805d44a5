package builtin_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/tools"
	"github.com/agentwire/agentwire/internal/tools/builtin"
)

func TestRead(t *testing.T) {
	e := newEnv(t, builtin.Options{})
	var long strings.Builder
	for i := 1; i <= 3000; i++ {
		fmt.Fprintf(&long, "line %d\n", i)
	}
	require.NoError(t, os.WriteFile(filepath.Join(e.dir, "long.txt"), []byte(long.String()), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(e.dir, "bin"), []byte("ab\x00cd"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(e.dir, "empty"), nil, 0o644))

	tests := []struct {
		args    map[string]any
		want    string
		isError bool
	}{
		{map[string]any{"path": "a.txt"}, "alpha\nbeta\ngamma\n", false},
		{map[string]any{"path": "./sub/../a.txt", "offset": 2}, "beta\ngamma\n", false},
		{map[string]any{"path": "a.txt", "offset": 2, "limit": 1}, "beta\n[lines 2-2 shown; more follow: call read with offset=3 to continue]", false},
		{map[string]any{"path": filepath.Join(e.dir, "a.txt"), "limit": 1}, "alpha\n[lines 1-1 shown; more follow: call read with offset=2 to continue]", false},
		{map[string]any{"path": "a.txt", "offset": 9}, "offset 9 is past the end of a.txt (3 lines)", true},
		{map[string]any{"path": "bin"}, "bin is a binary file (5 bytes); not shown", false},
		{map[string]any{"path": "empty"}, "(empty is empty)", false},
		{map[string]any{"path": "sub"}, "sub is a directory; use ls to list it", true},
		{map[string]any{"path": "missing.txt"}, "missing.txt: no such file or directory", true},
		{map[string]any{}, "path is required", true},
	}
	for _, tt := range tests {
		res := e.call("read", tt.args)
		if res.Content != tt.want || res.IsError != tt.isError {
			t.Errorf("read(%v) = %+v, want {%q %v}", tt.args, res, tt.want, tt.isError)
		}
	}

	res := e.call("read", map[string]any{"path": "long.txt"})
	require.True(t, strings.HasPrefix(res.Content, "line 1\n"))
	require.True(t, strings.HasSuffix(res.Content, "line 2000\n[lines 1-2000 shown; more follow: call read with offset=2001 to continue]"), res.Content[len(res.Content)-100:])
	res = e.call("read", map[string]any{"path": "long.txt", "offset": 2990})
	require.Equal(t, "line 2990\nline 2991\nline 2992\nline 2993\nline 2994\nline 2995\nline 2996\nline 2997\nline 2998\nline 2999\nline 3000\n", res.Content)

	res = e.call("read", map[string]any{"path": 42})
	require.True(t, res.IsError)
	require.Contains(t, res.Content, "invalid arguments for read")
	require.Equal(t, tools.Class{Effect: tools.EffectRead}, e.classify("read", map[string]any{"path": "../x"}))
}

func TestWriteFileAndEdit(t *testing.T) {
	e := newEnv(t, builtin.Options{})

	res := e.call("write_file", map[string]any{"path": "new/deep/c.txt", "content": "one\ntwo two\n"})
	require.Equal(t, tools.Result{Content: "Created new/deep/c.txt (12 bytes)"}, res)
	require.Equal(t, "one\ntwo two\n", e.file("new/deep/c.txt"))
	res = e.call("write_file", map[string]any{"path": "a.txt", "content": "replaced"})
	require.Equal(t, tools.Result{Content: "Replaced a.txt (8 bytes)"}, res)
	require.Equal(t, "replaced", e.file("a.txt"))
	require.Equal(t, tools.Class{Effect: tools.EffectEdit, Key: "write_file"}, e.classify("write_file", map[string]any{"path": "x", "content": ""}))

	c := "new/deep/c.txt"
	res = e.call("edit", map[string]any{"path": c, "old_string": "one", "new_string": "ONE"})
	require.Equal(t, tools.Result{Content: "Edited new/deep/c.txt: 1 replacement(s)"}, res)
	require.Equal(t, "ONE\ntwo two\n", e.file(c))

	for _, bad := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"path": c, "old_string": "two", "new_string": "2"}, "occurs 2 times"},
		{map[string]any{"path": c, "old_string": "three", "new_string": "3"}, "was not found"},
		{map[string]any{"path": c, "old_string": "", "new_string": "3"}, "old_string is empty"},
		{map[string]any{"path": c, "old_string": "ONE", "new_string": "ONE"}, "are the same"},
		{map[string]any{"path": "nope.txt", "old_string": "a", "new_string": "b"}, "no such file"},
	} {
		res := e.call("edit", bad.args)
		require.True(t, res.IsError, "edit(%v)", bad.args)
		require.Contains(t, res.Content, bad.want)
	}
	require.Equal(t, "ONE\ntwo two\n", e.file(c))

	res = e.call("edit", map[string]any{"path": c, "old_string": "two", "new_string": "2", "replace_all": true})
	require.Equal(t, tools.Result{Content: "Edited new/deep/c.txt: 2 replacement(s)"}, res)
	require.Equal(t, "ONE\n2 2\n", e.file(c))

	// multiedit is all or nothing.
	res = e.call("multiedit", map[string]any{"path": c, "edits": []map[string]any{
		{"old_string": "ONE", "new_string": "uno"},
		{"old_string": "missing", "new_string": "x"},
	}})
	require.True(t, res.IsError)
	require.Contains(t, res.Content, "edit 2: old_string was not found")
	require.Equal(t, "ONE\n2 2\n", e.file(c))
	res = e.call("multiedit", map[string]any{"path": c, "edits": []map[string]any{
		{"old_string": "ONE", "new_string": "uno"},
		{"old_string": "uno\n2", "new_string": "uno\ndos"},
	}})
	require.False(t, res.IsError, res.Content)
	require.Equal(t, "uno\ndos 2\n", e.file(c))
}

func TestMoveDeleteCreate(t *testing.T) {
	e := newEnv(t, builtin.Options{})

	require.False(t, e.call("create_dir", map[string]any{"path": "x/y"}).IsError)
	fi, err := os.Stat(filepath.Join(e.dir, "x", "y"))
	require.NoError(t, err)
	require.True(t, fi.IsDir())

	res := e.call("move_file", map[string]any{"source": "a.txt", "destination": "x/y/a.txt"})
	require.Equal(t, tools.Result{Content: "Moved a.txt to x/y/a.txt"}, res)
	require.False(t, e.exists("a.txt"))
	require.Equal(t, "alpha\nbeta\ngamma\n", e.file("x/y/a.txt"))

	res = e.call("move_file", map[string]any{"source": "x/y/a.txt", "destination": "sub/b.go"})
	require.True(t, res.IsError)
	require.Contains(t, res.Content, "sub/b.go already exists")
	res = e.call("move_file", map[string]any{"source": "nope", "destination": "n2"})
	require.True(t, res.IsError)

	// A link is deleted itself; its target stays.
	require.False(t, e.call("delete_file", map[string]any{"path": "secret"}).IsError)
	require.False(t, e.exists("secret"))
	_, err = os.Stat(filepath.Join(e.base, "outside", "secret.txt"))
	require.NoError(t, err)

	require.False(t, e.call("delete_file", map[string]any{"path": "x/y/a.txt"}).IsError)
	require.False(t, e.exists("x/y/a.txt"))
	res = e.call("delete_file", map[string]any{"path": "sub"})
	require.True(t, res.IsError, "a folder that is not empty stays")
	require.True(t, e.exists("sub/b.go"))
	require.False(t, e.call("delete_file", map[string]any{"path": "x/y"}).IsError)

	for _, name := range []string{"move_file", "delete_file", "create_dir"} {
		require.Equal(t, tools.Class{Effect: tools.EffectEdit, Key: name}, e.classify(name, map[string]any{"path": "p", "source": "a", "destination": "b"}))
	}
}

func TestLs(t *testing.T) {
	e := newEnv(t, builtin.Options{})
	require.NoError(t, os.Symlink("sub", filepath.Join(e.dir, "inner")))
	require.NoError(t, os.MkdirAll(filepath.Join(e.dir, "emptydir"), 0o755))

	res := e.call("ls", map[string]any{})
	require.Equal(t, "a.txt\ndangling\nemptydir/\ninner/\nnested\nout\nsecret\nsub/", res.Content)
	require.Equal(t, res, e.call("ls", map[string]any{"path": "."}))
	require.Equal(t, "b.go\nup", e.call("ls", map[string]any{"path": "inner"}).Content)
	require.Equal(t, "(emptydir is empty)", e.call("ls", map[string]any{"path": "emptydir"}).Content)
	require.Equal(t, "a.txt (17 bytes)", e.call("ls", map[string]any{"path": "a.txt"}).Content)
}

func TestGlob(t *testing.T) {
	e := newEnv(t, builtin.Options{})
	for _, p := range []string{"src/app.ts", "src/ui/view.tsx", "src/ui/deep/x.ts", "src/readme.md", ".git/config.ts", "top.ts"} {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(e.dir, p)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(e.dir, p), nil, 0o644))
	}
	tests := []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"pattern": "*.ts"}, "top.ts"},
		{map[string]any{"pattern": "**/*.ts"}, "src/app.ts\nsrc/ui/deep/x.ts\ntop.ts"},
		{map[string]any{"pattern": "src/**/*.{ts,tsx}"}, "src/app.ts\nsrc/ui/deep/x.ts\nsrc/ui/view.tsx"},
		{map[string]any{"pattern": "src/**"}, "src/app.ts\nsrc/readme.md\nsrc/ui/deep/x.ts\nsrc/ui/view.tsx"},
		{map[string]any{"pattern": "**/ui/*"}, "src/ui/view.tsx"},
		{map[string]any{"pattern": "*.ts", "path": "src"}, "src/app.ts"},
		{map[string]any{"pattern": "**/x.ts", "path": "src/ui"}, "src/ui/deep/x.ts"},
		{map[string]any{"pattern": ".git/*"}, ".git/config.ts"},
		{map[string]any{"pattern": "**/*.rs"}, `No files match "**/*.rs".`},
	}
	for _, tt := range tests {
		res := e.call("glob", tt.args)
		if res.Content != tt.want || res.IsError {
			t.Errorf("glob(%v) = %+v, want %q", tt.args, res, tt.want)
		}
	}
	for _, bad := range []string{"", "[", "{a,b", "/abs/*", "a/../../b"} {
		require.True(t, e.call("glob", map[string]any{"pattern": bad}).IsError, "glob(%q)", bad)
	}
}

func TestGrep(t *testing.T) {
	e := newEnv(t, builtin.Options{})
	require.NoError(t, os.WriteFile(filepath.Join(e.dir, "sub", "c.go"), []byte("package sub\n// TODO: more\nfunc C() {}\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(e.dir, "sub", "bin.dat"), []byte("package\x00sub"), 0o644))
	var many strings.Builder
	for range 600 {
		many.WriteString("hit\n")
	}
	require.NoError(t, os.WriteFile(filepath.Join(e.dir, "many.txt"), []byte(many.String()), 0o644))

	tests := []struct {
		args    map[string]any
		want    string
		isError bool
	}{
		{map[string]any{"pattern": "^package"}, "sub/b.go:1:package sub\nsub/c.go:1:package sub", false},
		{map[string]any{"pattern": `func \w+\(`, "path": "sub"}, "sub/b.go:3:func B() int { return 2 }\nsub/c.go:3:func C() {}", false},
		{map[string]any{"pattern": "todo", "ignore_case": true}, "sub/c.go:2:// TODO: more", false},
		{map[string]any{"pattern": "package", "glob": "c.*"}, "sub/c.go:1:package sub", false},
		{map[string]any{"pattern": "package", "glob": "sub/b.go"}, "sub/b.go:1:package sub", false},
		{map[string]any{"pattern": "beta", "path": "a.txt"}, "a.txt:2:beta", false},
		{map[string]any{"pattern": "nothing-here"}, `No matches for "nothing-here".`, false},
		{map[string]any{"pattern": "("}, "invalid pattern", true},
	}
	for _, tt := range tests {
		res := e.call("grep", tt.args)
		if !strings.HasPrefix(res.Content, tt.want) || res.IsError != tt.isError || !tt.isError && res.Content != tt.want {
			t.Errorf("grep(%v) = %+v, want {%q %v}", tt.args, res, tt.want, tt.isError)
		}
	}
	res := e.call("grep", map[string]any{"pattern": "^hit$"})
	require.Len(t, strings.Split(res.Content, "\n"), 501, "500 matches and a note")
	require.True(t, strings.HasSuffix(res.Content, "[only the first 500 matches are shown; narrow the search]"))
}
