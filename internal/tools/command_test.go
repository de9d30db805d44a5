package tools_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"mvdan.cc/sh/v3/syntax"

	"github.com/agentwire/agentwire/internal/tools"
)

func TestSplitCommand(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"ls -la", []string{"ls", "-la"}},
		{`  grep  "a b"  'c d' e\ f  `, []string{"grep", "a b", "c d", "e f"}},
		{`echo "say \"hi\" \$HOME \q"`, []string{"echo", `say "hi" $HOME \q`}},
		{`echo 'it''s'`, []string{"echo", "its"}},
		{`echo "" ''`, []string{"echo", "", ""}},
		{"git status && git diff", []string{"git", "status", "&&", "git", "diff"}},
		{"ls|wc -l;pwd", []string{"ls", "|", "wc", "-l", ";", "pwd"}},
		{"a||b&c", []string{"a", "||", "b", "&", "c"}},
		{"echo hi > out.txt", []string{"echo", "hi", ">", "out.txt"}},
		{"echo hi>>out", []string{"echo", "hi", ">>", "out"}},
		{"cmd 2>/dev/null 2>&1 >&2", []string{"cmd", "2>", "/dev/null", "2>&", "1", ">&", "2"}},
		{"cmd a2>x", []string{"cmd", "a2", ">", "x"}},
		{`cmd "2">x`, []string{"cmd", "2", ">", "x"}},
		{"cat <in &>all", []string{"cat", "<", "in", "&>", "all"}},
		{"(cd x; ls)", []string{"(", "cd", "x", ";", "ls", ")"}},
		{"ls\npwd", []string{"ls", ";", "pwd"}},
		{"ls \\\n -l", []string{"ls", "-l"}},
		{"ls # a comment; rm -rf /\npwd", []string{"ls", ";", "pwd"}},
		{"echo a#b", []string{"echo", "a#b"}},
		{"echo $HOME ${X:-y}", []string{"echo", "$HOME", "${X:-y}"}},
		{"echo '$(not run)' '`nor this`'", []string{"echo", "$(not run)", "`nor this`"}},
		{"", nil},
	}
	for _, tt := range tests {
		got, err := tools.SplitCommand(tt.in)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("SplitCommand(%q) = %q, %v, want %q", tt.in, got, err, tt.want)
		}
	}
	for in, want := range map[string]error{
		`echo "open`:            tools.ErrUnterminatedQuote,
		`echo 'open`:            tools.ErrUnterminatedQuote,
		"echo $(rm -rf x)":      tools.ErrSubstitution,
		"echo `rm -rf x`":       tools.ErrSubstitution,
		`echo "$(rm -rf x)"`:    tools.ErrSubstitution,
		`echo "a` + "`b`" + `"`: tools.ErrSubstitution,
	} {
		if _, err := tools.SplitCommand(in); !errors.Is(err, want) {
			t.Errorf("SplitCommand(%q) error = %v, want %v", in, err, want)
		}
	}
}

// exact, as a want key, is the line's own key (tools.LineKey): approving
// the line always approves that line and no other.
const exact = "\x00exact line"

func TestClassifyShell(t *testing.T) {
	tests := []struct {
		line     string
		readOnly bool
		key      string
	}{
		{"ls -la", true, "ls"},
		{"cat README.md", true, "cat"},
		{"head -n 20 main.go", true, "head"},
		{"head -20 main.go", true, "head"},
		{"tail -5 log.txt", true, "tail"},
		{"tail -f log.txt", false, "tail"},
		{"wc -l src/*.go", true, "wc"},
		{"wc -l ./*.go", true, "wc"},
		{"pwd", true, "pwd"},
		{"echo hello", true, "echo"},
		{"grep -rn TODO .", true, "grep"},
		{"grep --color=auto -i x f", true, "grep"},
		{"rg -i foo src", true, "rg"},
		{"rg --pre cat foo", false, "rg"},
		{"rg --pre=cat foo", false, "rg"},
		{"rg -zi foo", false, "rg"},
		{"rg --search-zip foo", false, "rg"},
		{"find . -name '*.go'", true, "find"},
		{"find . -type f -name x -print", true, "find"},
		{"find . -newermt 2024-01-01", true, "find"},
		{"find . -name x -exec rm {} ;", false, "find"},
		{"find . -delete", false, "find"},
		{"find . -execdir ls ;", false, "find"},
		{"find . -ok ls ;", false, "find"},
		{"find . -fprint out", false, "find"},
		{"find . -fprintf out %p", false, "find"},
		{"find . -fls out", false, "find"},
		{"find . -name", false, "find"},
		{"sed -n 1,20p main.go", true, "sed"},
		{"sed -n '$p' main.go", true, "sed"},
		{"sed -ne 5p main.go", true, "sed"},
		{"sed -n -e 10p f", true, "sed"},
		{"sed -n '/func main/,/^}/p' main.go", true, "sed"},
		{"sed -n '/a/p;/b/=' f", true, "sed"},
		{"sed -n '\\,x,p' f", true, "sed"},
		{"sed -i s/a/b/ f", false, "sed"},
		{"sed -ni 1p f", false, "sed"},
		{"sed 1p f", false, "sed"},
		{"sed -n '1w out' f", false, "sed"},
		{"sed -n '/x/w out' f", false, "sed"},
		{"sed -n '/w x/p' f", true, "sed"},
		{"sed -n '1W out' f", false, "sed"},
		{"sed -n '1e id' f", false, "sed"},
		{"sed -n 's/a/b/w out' f", false, "sed"},
		{"sed -n 's/a/b/e' f", false, "sed"},
		{"sed -n --expr=1p f", false, "sed"},
		{"sed -n -f script f", false, "sed"},
		{"git status", true, "git"},
		{"git log --oneline -5", true, "git"},
		{"git log --format=%H -n 3", true, "git"},
		{"git diff HEAD~1", true, "git"},
		{"git diff --cached --stat", true, "git"},
		{"git show HEAD:main.go", true, "git"},
		{"git rev-parse HEAD", true, "git"},
		{"git --no-pager log", true, "git"},
		{"git branch", true, "git"},
		{"git branch -a -v", true, "git"},
		{"git branch --list 'feat*'", true, "git"},
		{"git branch --contains HEAD", true, "git"},
		{"git config --get user.name", true, "git"},
		{"git config user.name x", false, "git"},
		{"git branch new-feature", false, "git"},
		{"git branch -D old", false, "git"},
		{"git branch -m a b", false, "git"},
		{"git diff --output=/tmp/x", false, "git"},
		{"git diff --outp=/tmp/x", false, "git"},
		{"git diff --ext-diff", false, "git"},
		{"git diff --textconv", false, "git"},
		{"git log --show-signature", false, "git"},
		{"git grep -O x", false, "git"},
		{"git -c core.pager=sh log", false, "git"},
		{"git -c core.fsmonitor=x status", false, "git"},
		{"git -C .. status", false, "git"},
		{"git commit -m x", false, "git"},
		{"git push", false, "git"},
		{"git", false, "git"},
		{"tree -L 2", true, "tree"},
		{"tree -o out.txt", false, "tree"},
		{"tree -R", false, "tree"},
		{"stat go.mod", true, "stat"},
		{"file main.go", true, "file"},
		{"file -C -m magic", false, "file"},
		{"file -z x.gz", false, "file"},
		{"which go", true, "which"},
		{"date +%Y", true, "date"},
		{"date -u +%s", true, "date"},
		{"date -s 2020-01-01", false, "date"},
		{"date -s2020-01-01", false, "date"},
		{"date --set=2020-01-01", false, "date"},
		{"date --se=2020-01-01", false, "date"},
		{"date 0101000020", false, "date"},
		{"hostname", true, "hostname"},
		{"hostname evil", false, "hostname"},
		{"du -sh .", true, "du"},
		{"df -h", true, "df"},
		{"cut -d: -f1 /etc/passwd", true, "cut"},
		{"tr a-z A-Z", true, "tr"},
		{"basename a/b.go", true, "basename"},
		{"realpath .", true, "realpath"},
		{"diff -u a b", true, "diff"},
		{"diff -l a b", false, "diff"},
		{"printf '%s\\n' x", true, "printf"},
		{"printf '%d' 5", true, "printf"},
		{"printf -v x '%s' y", false, "printf"},
		{"printf -v 'a[$(touch ../outside/X)]' %s x", false, "printf"},
		{"sort -u names.txt", true, "sort"},
		{"sort -o out.txt in.txt", false, "sort"},
		{"sort -uo out.txt in.txt", false, "sort"},
		{"sort --output=out.txt in.txt", false, "sort"},
		{"sort --outp=../outside/X in", false, "sort"},
		{"sort --compress-program=sh in.txt", false, "sort"},
		{"sort -T /tmp in.txt", false, "sort"},
		{"uniq -c names.txt", true, "uniq"},
		{"uniq names.txt out.txt", false, "uniq"},
		{"uniq -- in ../outside/X", false, "uniq"},
		{"git ls-files", true, "git"},
		{"git blame main.go", true, "git"},
		{"rm -rf node_modules", false, "rm"},
		{"make test", false, "make"},
		{"awk 'BEGIN{system(\"id\")}'", false, "awk"},
		{"xargs rm < list", false, "xargs"},
		{"env -S 'sh -c id'", false, "env"},
		{"tee out.txt", false, "tee"},
		{"./ls", false, "./ls"},
		{"/bin/ls", false, "/bin/ls"},
		{"'ls' -la", true, "ls"},
		{"\\ls", true, "ls"},
		// Expansions: nothing but literal words.
		{"PAGER=evil git log", false, exact},
		{"BASH_ENV=x.sh bash -c true", false, exact},
		{"echo $HOME", false, exact},
		{"echo ${x@P}", false, exact},
		{"printf -v x '%s' '$(id)'; echo ${x@P}", false, exact},
		{"echo $((1+2))", false, exact},
		{"cat <(ls)", false, exact},
		{"echo ~/x", false, exact},
		{"echo '~/x'", true, "echo"},
		{"echo $'\\x41'", false, exact},
		{"sort {--output=x,in}", false, exact},
		{"sort {\"--output=x\",in}", false, exact},
		{"echo a{b,c}", false, exact},
		{"echo '{a,b}'", true, "echo"},
		{"git show HEAD@{1}", true, "git"},
		{"cat *", false, exact},
		{"cat -*", false, exact},
		{"cat '-'*", false, exact},
		{"ls .*", true, "ls"},
		{"ls src/[ab].go", true, "ls"},
		// Composition: every part must be read-only; the key needs one program.
		{"git status && git diff", true, "git"},
		{"ls | wc -l", true, exact},
		{"grep -rn TODO . | sort | uniq -c | head", true, exact},
		{"cat f | sort -o sorted", false, exact},
		{"ls; pwd", true, exact},
		{"ls\npwd", true, exact},
		{"cd src && ls", true, exact},
		{"ls && rm -rf x", false, exact},
		{"cat f | sh", false, exact},
		{"ls || make", false, exact},
		{"ls & rm x", false, exact},
		{"ls &", false, "ls"},
		{"! grep -q x f", true, "grep"},
		{"git status; git commit -am x", false, "git"},
		{"(ls)", false, exact},
		{"{ ls; }", false, exact},
		{"f() { ls; }; f", false, exact},
		{"if true; then ls; fi", false, exact},
		{"for f in a b; do cat $f; done", false, exact},
		{"[[ -v 'a[$(id)]' ]]", false, exact},
		{"(( x = 1 ))", false, exact},
		{"declare -a x", false, exact},
		{"ls # a comment", true, "ls"},
		// Redirections: into a file is a write.
		{"echo hi > out.txt", false, exact},
		{"ls >> out.txt", false, exact},
		{"> out.txt ls", false, exact},
		{"ls &> all.txt", false, exact},
		{"ls >& all.txt", false, exact},
		{"ls >| out", false, exact},
		{"ls <> f", false, exact},
		{"ls {fd}>/dev/null", false, exact},
		{"cat <<EOF\nhi $x\nEOF", false, exact},
		{"cat <<'EOF'\nhi $x\nEOF", true, "cat"},
		{"ls 2>/dev/null", true, "ls"},
		{"ls >/dev/null 2>&1", true, "ls"},
		{"ls 2>&1 | head", true, exact},
		{"cat < go.mod", true, "cat"},
		{"cat < /dev/tcp/127.0.0.1/80", false, exact},
		{"cat <<< hi", true, "cat"},
		{"ls >", false, ""},
		// Not understood: never read-only.
		{"echo $(rm -rf x)", false, exact},
		{"echo `rm -rf x`", false, exact},
		{"echo 'unterminated", false, ""},
		{"", false, ""},
	}
	for _, tt := range tests {
		c := tools.ClassifyShell(tt.line)
		if tt.key == exact {
			tt.key = tools.LineKey(tt.line)
		}
		if c.Effect != tools.EffectCommand || c.ReadOnlyCommand != tt.readOnly || c.Key != tt.key {
			t.Errorf("ClassifyShell(%q) = {ReadOnly: %v, Key: %q}, want {ReadOnly: %v, Key: %q}", tt.line, c.ReadOnlyCommand, c.Key, tt.readOnly, tt.key)
		}
		want, err := tools.SplitCommand(tt.line)
		if err != nil || len(want) == 0 {
			want = []string{"bash", "-c", tt.line}
		}
		if !slices.Equal(c.Command, want) {
			t.Errorf("ClassifyShell(%q).Command = %q, want %q", tt.line, c.Command, want)
		}
	}
}

// TestClassifyArgv covers argv as a program is run with no shell, and
// shell wrappers that carry the real command line.
func TestClassifyArgv(t *testing.T) {
	tests := []struct {
		argv     []string
		readOnly bool
		key      string
	}{
		{[]string{"bash", "-lc", "git status"}, true, "git"},
		{[]string{"bash", "-c", "ls && pwd"}, true, "$ ls && pwd"},
		{[]string{"sh", "-c", "rm -rf /"}, false, "rm"},
		{[]string{"/bin/bash", "-lc", "cat x > y"}, false, "$ cat x > y"},
		{[]string{"bash", "-lc", "echo $(id)"}, false, "$ echo $(id)"},
		{[]string{"bash", "script.sh"}, false, "bash"},
		{[]string{"ls", "-la"}, true, "ls"},
		{[]string{"git", "log", "--format=%H > x"}, true, "git"},
		{[]string{"cat", ">", "x"}, true, "cat"}, // no shell: ">" is a file name
		{[]string{"sort", "--outp=x", "in"}, false, "sort"},
		{[]string{"/usr/bin/cat", "x"}, false, "/usr/bin/cat"},
		{nil, false, ""},
	}
	for _, tt := range tests {
		c := tools.ClassifyCommand(tt.argv)
		if c.ReadOnlyCommand != tt.readOnly || c.Key != tt.key {
			t.Errorf("ClassifyCommand(%q) = {ReadOnly: %v, Key: %q}, want {ReadOnly: %v, Key: %q}", tt.argv, c.ReadOnlyCommand, c.Key, tt.readOnly, tt.key)
		}
	}
}

func FuzzSplitCommand(f *testing.F) {
	for _, s := range []string{"ls -la", `grep "a b" 'c'`, "a && b | c > d 2>&1", "echo $(x)", "x\\\ny # z\n", `"\`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		words, err := tools.SplitCommand(line)
		// A substitution outside quotes, escapes and comments is refused.
		if err == nil && strings.Contains(line, "$(") && !strings.ContainsAny(line, `'\#`) {
			t.Fatalf("SplitCommand(%q) = %q, want ErrSubstitution", line, words)
		}
	})
}

// FuzzClassifyShell checks, on any line, that what the classifier lets run
// without asking has, by an independent walk of the same syntax tree, no
// expansion of any kind and no redirection but to /dev/null, from a file
// or between descriptors.
func FuzzClassifyShell(f *testing.F) {
	for _, s := range []string{"ls -la", "cat f | sort -o x", "echo ${x@P}", "printf -v 'a[$(id)]' %s x",
		"sort --outp=x in", "ls 2>/dev/null", "cat < f", "git log -5", "sed -n '/x/p' f", "find . -name '*.go'",
		"echo a{b,c}", "ls *.go", "cat <<'E'\nx\nE"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		c := tools.ClassifyShell(line)
		if !c.ReadOnlyCommand {
			return
		}
		file, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(line), "")
		if err != nil {
			t.Fatalf("ClassifyShell(%q) is read-only, but the line does not parse: %v", line, err)
		}
		syntax.Walk(file, func(n syntax.Node) bool {
			switch n := n.(type) {
			case *syntax.ParamExp, *syntax.CmdSubst, *syntax.ArithmExp, *syntax.ProcSubst, *syntax.Assign,
				*syntax.Subshell, *syntax.Block, *syntax.FuncDecl, *syntax.ExtGlob, *syntax.ArithmCmd, *syntax.TestClause,
				*syntax.DeclClause, *syntax.LetClause, *syntax.IfClause, *syntax.WhileClause, *syntax.ForClause, *syntax.CaseClause:
				t.Fatalf("ClassifyShell(%q) is read-only, but the line has a %T", line, n)
			case *syntax.Redirect:
				target := ""
				if n.Word != nil {
					target = n.Word.Lit()
				}
				switch n.Op {
				case syntax.RdrOut, syntax.AppOut, syntax.RdrAll, syntax.AppAll, syntax.RdrClob:
					if target != "/dev/null" {
						t.Fatalf("ClassifyShell(%q) is read-only, but it redirects into %q", line, target)
					}
				case syntax.RdrInOut:
					t.Fatalf("ClassifyShell(%q) is read-only, but it opens a file for writing", line)
				}
			case *syntax.Stmt:
				if n.Background {
					t.Fatalf("ClassifyShell(%q) is read-only, but it starts a background job", line)
				}
			}
			return true
		})
	})
}
