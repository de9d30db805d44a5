package tools

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// ClassifyShell classifies a shell command line, parsed as bash parses it
// (mvdan.cc/sh/v3/syntax). The line is a read-only command only when its
// syntax tree is a list or pipeline (;, &&, ||, |) of simple commands made
// of literal words, each an allow-listed program with allow-listed
// options (readonly.go), with no redirection but from a file or to
// /dev/null. Nothing that expands is a literal word: no parameter ($x,
// ${x@P}), arithmetic, command or process substitution, no assignment
// (FOO=x cmd), no tilde, no brace expansion, no $'...'; a glob (*.go) is
// accepted only when every name it can expand to starts with a literal
// that is not "-", so a file name cannot turn into an option. Subshells,
// blocks, functions, conditionals, loops, [[ ]], (( )), declare and
// background jobs ask.
//
// The classifier only decides whether to ask: a command it lets run
// without asking runs in the read-only sandbox, which holds even when
// this judgement is wrong.
//
// The approval key (what approve-always remembers) is the program's name
// when every simple command of the line runs the same program with
// literal words and nothing is redirected into a file (approving `git
// status` always approves git); otherwise it is the exact line, marked
// with a leading "$ " (LineKey), so that approving `touch a && echo b`
// always approves that line and no other. A line that does not parse has
// no key: it asks every time. Command holds the line as words
// (SplitCommand), or ["bash", "-c", line] when it cannot be split, for
// people to read.
func ClassifyShell(line string) Class {
	c := Class{Effect: EffectCommand, Command: []string{"bash", "-c", line}}
	if words, err := SplitCommand(line); err == nil && len(words) > 0 {
		c.Command = words
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(line), "")
	if err != nil || strings.TrimSpace(line) == "" {
		return c
	}
	c.Key = LineKey(line)
	j := &shellJudge{readOnly: true, keyed: true}
	for _, st := range f.Stmts {
		j.stmt(st)
	}
	if !j.seen {
		return c
	}
	if j.keyed && j.key != "" && !strings.ContainsAny(j.key, " \t\n") && !strings.HasPrefix(j.key, "$") {
		c.Key = j.key
	}
	c.ReadOnlyCommand = j.readOnly
	return c
}

// LineKey is the approval key of an exact command line: the line, trimmed,
// after "$ " (a program's key is its bare name, which has no spaces).
func LineKey(line string) string { return "$ " + strings.TrimSpace(line) }

// IsLineKey reports whether key is an exact command line's (LineKey)
// rather than a program's or a tool's.
func IsLineKey(key string) bool { return strings.HasPrefix(key, "$ ") }

// shellJudge walks a parsed command line.
type shellJudge struct {
	readOnly bool   // every command so far is a read-only one
	keyed    bool   // every command so far runs key, with literal words, writing no file
	key      string // the program of the first command
	seen     bool   // a simple command was seen
}

// refuse marks the line as neither read-only nor keyed.
func (j *shellJudge) refuse() { j.readOnly, j.keyed = false, false }

func (j *shellJudge) stmt(st *syntax.Stmt) {
	if st.Background || st.Coprocess || st.Disown {
		j.readOnly = false
	}
	for _, r := range st.Redirs {
		if !readOnlyRedirect(r) {
			j.refuse()
		}
	}
	switch cmd := st.Cmd.(type) {
	case *syntax.CallExpr:
		j.call(cmd)
	case *syntax.BinaryCmd:
		switch cmd.Op {
		case syntax.AndStmt, syntax.OrStmt, syntax.Pipe, syntax.PipeAll:
			j.stmt(cmd.X)
			j.stmt(cmd.Y)
		default:
			j.refuse()
		}
	default:
		// nil (only redirections), subshells, blocks, functions, if,
		// loops, case, [[ ]], (( )), declare, let, time, coproc.
		j.refuse()
	}
}

func (j *shellJudge) call(ce *syntax.CallExpr) {
	if len(ce.Assigns) > 0 || len(ce.Args) == 0 {
		j.refuse() // FOO=bar cmd: the variable can change what cmd does (BASH_ENV, PAGER, LD_PRELOAD)
		return
	}
	words := make([]string, len(ce.Args))
	for i, w := range ce.Args {
		lit, ok := literal(w)
		if !ok {
			j.refuse()
			return
		}
		words[i] = lit
	}
	prog := words[0]
	if !j.seen {
		j.key, j.seen = prog, true
	} else if prog != j.key {
		j.key, j.keyed = "", false
	}
	if strings.ContainsRune(prog, '/') || !judge(programs, prog, words[1:]) {
		j.readOnly = false // ./ls or /tmp/ls is anyone's program
	}
}

// readOnlyRedirect reports whether a redirection leaves files alone: it
// reads a file (not one of bash's /dev/tcp, /dev/udp or /dev/fd names) or
// a literal here-document, writes to /dev/null, or duplicates or closes a
// file descriptor.
func readOnlyRedirect(r *syntax.Redirect) bool {
	if r.N != nil && !digits(r.N.Value) {
		return false // {var}>file assigns a variable
	}
	target, ok := "", true
	if r.Word != nil {
		target, ok = literal(r.Word)
		if !ok {
			return false
		}
	}
	switch r.Op {
	case syntax.RdrOut, syntax.AppOut, syntax.RdrAll, syntax.AppAll, syntax.RdrClob:
		return target == "/dev/null"
	case syntax.DplOut, syntax.DplIn:
		return digits(target) || target == "-" // >&2, 2>&1, >&-; >&file writes file
	case syntax.RdrIn:
		return target != "" && (target == "/dev/null" || !strings.HasPrefix(target, "/dev/"))
	case syntax.WordHdoc:
		return true
	case syntax.Hdoc, syntax.DashHdoc:
		if r.Hdoc == nil {
			return true
		}
		_, ok := literal(r.Hdoc)
		return ok
	}
	return false // <> opens for writing
}

// literal returns the word a shell would pass for w, and false when w
// expands to something that cannot be known from the text: parameters,
// substitutions, arithmetic, $'...' and $"...", a leading ~, brace
// expansion, or a glob that could expand to a name starting with "-".
func literal(w *syntax.Word) (string, bool) {
	var b strings.Builder
	var (
		glob    bool // an unquoted *, ? or [, after a literal start
		brace   bool // an unquoted {
		expands bool // an unquoted , or .. after a {: brace expansion
	)
	for i, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			v := p.Value
			for k := 0; k < len(v); k++ {
				ch := v[k]
				switch {
				case ch == '\\':
					if k+1 < len(v) {
						k++
						if v[k] != '\n' {
							b.WriteByte(v[k])
						}
					}
					continue
				case ch == '~' && i == 0 && k == 0:
					return "", false
				case ch == '*' || ch == '?' || ch == '[':
					if b.Len() == 0 {
						return "", false // *x can expand to -x
					}
					glob = true
				case ch == '{':
					brace = true
				case brace && (ch == ',' || ch == '.' && k+1 < len(v) && v[k+1] == '.'):
					expands = true
				}
				b.WriteByte(ch)
			}
		case *syntax.SglQuoted:
			if p.Dollar {
				return "", false
			}
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			if p.Dollar {
				return "", false
			}
			for _, dp := range p.Parts {
				lit, ok := dp.(*syntax.Lit)
				if !ok {
					return "", false
				}
				writeDoubleQuoted(&b, lit.Value)
			}
		default:
			return "", false
		}
	}
	s := b.String()
	if expands {
		return "", false
	}
	if glob && strings.HasPrefix(s, "-") {
		return "", false // -*: every name it expands to is an option
	}
	return s, true
}

// writeDoubleQuoted writes the text of a literal inside double quotes:
// a backslash quotes only $, `, ", \ and a newline (which it removes).
func writeDoubleQuoted(b *strings.Builder, v string) {
	for k := 0; k < len(v); k++ {
		if v[k] == '\\' && k+1 < len(v) && strings.IndexByte("$`\"\\\n", v[k+1]) >= 0 {
			k++
			if v[k] != '\n' {
				b.WriteByte(v[k])
			}
			continue
		}
		b.WriteByte(v[k])
	}
}
