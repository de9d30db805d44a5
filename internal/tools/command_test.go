package tools_test

import (
	"errors"
	"slices"
	"testing"

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

func TestClassifyCommand(t *testing.T) {
	tests := []struct {
		line     string
		readOnly bool
		key      string
	}{
		{"ls -la", true, "ls"},
		{"cat README.md", true, "cat"},
		{"head -n 20 main.go", true, "head"},
		{"tail -5 log.txt", true, "tail"},
		{"wc -l *.go", true, "wc"},
		{"pwd", true, "pwd"},
		{"echo hello", true, "echo"},
		{"grep -rn TODO .", true, "grep"},
		{"rg -i foo src", true, "rg"},
		{"rg --pre cat foo", false, "rg"},
		{"rg -zi foo", false, "rg"},
		{"find . -name '*.go'", true, "find"},
		{"find . -name x -exec rm {} ;", false, "find"},
		{"find . -delete", false, "find"},
		{"find . -execdir ls ;", false, "find"},
		{"find . -fprint out", false, "find"},
		{"sed -n 1,20p main.go", true, "sed"},
		{"sed -n '$p' main.go", true, "sed"},
		{"sed -ne 5p main.go", true, "sed"},
		{"sed -n -e 10p f", true, "sed"},
		{"sed -i s/a/b/ f", false, "sed"},
		{"sed -ni 1p f", false, "sed"},
		{"sed 1p f", false, "sed"},
		{"sed -n '1w out' f", false, "sed"},
		{"sed -n '1e rm -rf x' f", false, "sed"},
		{"git status", true, "git"},
		{"git log --oneline -5", true, "git"},
		{"git diff HEAD~1", true, "git"},
		{"git show HEAD:main.go", true, "git"},
		{"git rev-parse HEAD", true, "git"},
		{"git --no-pager log", true, "git"},
		{"git branch", true, "git"},
		{"git branch -a -v", true, "git"},
		{"git branch --list 'feat*'", true, "git"},
		{"git branch --contains HEAD", true, "git"},
		{"git branch new-feature", false, "git"},
		{"git branch -D old", false, "git"},
		{"git branch -m a b", false, "git"},
		{"git diff --output=/tmp/x", false, "git"},
		{"git diff --ext-diff", false, "git"},
		{"git -c core.pager=sh log", false, "git"},
		{"git commit -m x", false, "git"},
		{"git push", false, "git"},
		{"git", false, "git"},
		{"tree -L 2", true, "tree"},
		{"tree -o out.txt", false, "tree"},
		{"stat go.mod", true, "stat"},
		{"file main.go", true, "file"},
		{"file -C -m magic", false, "file"},
		{"which go", true, "which"},
		{"date +%Y", true, "date"},
		{"date -s 2020-01-01", false, "date"},
		{"date 0101000020", false, "date"},
		{"du -sh .", true, "du"},
		{"df -h", true, "df"},
		{"cut -d: -f1 /etc/passwd", true, "cut"},
		{"tr a-z A-Z", true, "tr"},
		{"basename a/b.go", true, "basename"},
		{"realpath .", true, "realpath"},
		{"diff -u a b", true, "diff"},
		{"printf '%s\\n' x", true, "printf"},
		{"sort -u names.txt", true, "sort"},
		{"sort -o out.txt in.txt", false, "sort"},
		{"sort --output=out.txt in.txt", false, "sort"},
		{"sort --compress-program=sh in.txt", false, "sort"},
		{"uniq -c names.txt", true, "uniq"},
		{"uniq names.txt out.txt", false, "uniq"},
		{"git ls-files", true, "git"},
		{"git blame main.go", true, "git"},
		{"rm -rf node_modules", false, "rm"},
		{"make test", false, "make"},
		{"./ls", false, "./ls"},
		{"/bin/ls", false, "/bin/ls"},
		{"PAGER=evil git log", false, "PAGER=evil"},
		// Composition: every part must be read-only; the key needs one program.
		{"git status && git diff", true, "git"},
		{"ls | wc -l", true, ""},
		{"grep -rn TODO . | sort | uniq -c | head", true, ""},
		{"cat f | sort -o sorted", false, ""},
		{"ls; pwd", true, ""},
		{"cd src && ls", true, ""},
		{"ls && rm -rf x", false, ""},
		{"cat f | sh", false, ""},
		{"ls || make", false, ""},
		{"ls & rm x", false, ""},
		{"git status; git commit -am x", false, "git"},
		{"(ls)", false, ""},
		// Redirections: into a file is a write.
		{"echo hi > out.txt", false, ""},
		{"ls >> out.txt", false, ""},
		{"> out.txt ls", false, ""},
		{"ls &> all.txt", false, ""},
		{"ls >& all.txt", false, ""},
		{"ls >| out", false, ""},
		{"cat <<EOF", false, ""},
		{"ls 2>/dev/null", true, "ls"},
		{"ls 2>&1 | head", true, ""},
		{"cat < go.mod", true, "cat"},
		{"cat <<< hi", true, "cat"},
		{"ls >", false, ""},
		// Not understood: never read-only.
		{"echo $(rm -rf x)", false, ""},
		{"echo `rm -rf x`", false, ""},
		{"echo 'unterminated", false, ""},
		{"", false, ""},
	}
	for _, tt := range tests {
		argv, err := tools.SplitCommand(tt.line)
		if err != nil {
			argv = []string{"bash", "-c", tt.line}
		}
		c := tools.ClassifyCommand(argv)
		if c.Effect != tools.EffectCommand || c.ReadOnlyCommand != tt.readOnly || c.Key != tt.key {
			t.Errorf("ClassifyCommand(%q) = {ReadOnly: %v, Key: %q}, want {ReadOnly: %v, Key: %q}", tt.line, c.ReadOnlyCommand, c.Key, tt.readOnly, tt.key)
		}
		if !slices.Equal(c.Command, argv) {
			t.Errorf("ClassifyCommand(%q).Command = %q, want %q", tt.line, c.Command, argv)
		}
	}
}

// TestClassifyArgv covers argv as AgentLoop's shell calls give it, where a
// shell wrapper carries the real command line.
func TestClassifyArgv(t *testing.T) {
	tests := []struct {
		argv     []string
		readOnly bool
		key      string
	}{
		{[]string{"bash", "-lc", "git status"}, true, "git"},
		{[]string{"bash", "-c", "ls && pwd"}, true, ""},
		{[]string{"sh", "-c", "rm -rf /"}, false, "rm"},
		{[]string{"/bin/bash", "-lc", "cat x > y"}, false, ""},
		{[]string{"bash", "-lc", "echo $(id)"}, false, ""},
		{[]string{"bash", "script.sh"}, false, "bash"},
		{[]string{"ls", "-la"}, true, "ls"},
		{[]string{"git", "log", "--format=%H > x"}, true, "git"},
		{[]string{"cat", ">", "x"}, false, ""}, // a literal ">" argument: judged as a redirection, the safe mistake
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
		if err != nil {
			return
		}
		c := tools.ClassifyCommand(words)
		if c.ReadOnlyCommand && slices.ContainsFunc(words, func(w string) bool { return w == ">" || w == ">>" }) {
			for i, w := range words {
				if (w == ">" || w == ">>") && (i+1 >= len(words) || words[i+1] != "/dev/null") {
					t.Fatalf("ClassifyCommand(%q) read-only despite a redirection into a file", words)
				}
			}
		}
	})
}
