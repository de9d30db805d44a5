package tools

import (
	"errors"
	"path/filepath"
	"strings"
)

// Errors of SplitCommand.
var (
	// ErrUnterminatedQuote reports a quote with no closing quote.
	ErrUnterminatedQuote = errors.New("unterminated quote")
	// ErrSubstitution reports $(...) or `...`: what they run cannot be
	// known before the shell runs them.
	ErrSubstitution = errors.New("command substitution")
)

// SplitCommand splits a shell command line into words the way a POSIX shell
// would before expansion: quotes and backslashes are removed, and control
// and redirection operators (|, ||, &&, ;, &, (, ), <, >, >>, 2>, >&, ...)
// become words of their own; a newline becomes ";". Variables ($HOME) and
// globs are left as written. It refuses what it cannot see through:
// command substitution (ErrSubstitution) and unbalanced quotes
// (ErrUnterminatedQuote).
//
// It exists to show a command line to people as words (approval prompts,
// AgentLoop's shell calls); it judges nothing. ClassifyShell parses the
// line with a real shell parser instead.
func SplitCommand(line string) ([]string, error) {
	var (
		words  []string
		cur    strings.Builder
		inWord bool // cur holds a word (possibly empty: "")
		digits bool // cur is unquoted digits so far (a file descriptor before < or >)
	)
	flush := func() {
		if inWord {
			words = append(words, cur.String())
		}
		cur.Reset()
		inWord, digits = false, false
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' || c == '\t' || c == '\r':
			flush()
		case c == '\n':
			flush()
			words = append(words, ";")
		case c == '#' && !inWord:
			for i < len(line) && line[i] != '\n' {
				i++
			}
			i-- // let the newline, if any, be seen
		case c == '\\':
			if i+1 < len(line) {
				i++
				if line[i] != '\n' { // backslash-newline continues the line
					cur.WriteByte(line[i])
					inWord, digits = true, false
				}
			}
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				return nil, ErrUnterminatedQuote
			}
			cur.WriteString(line[i+1 : i+1+j])
			inWord, digits = true, false
			i += j + 1
		case c == '"':
			i++
			for ; i < len(line) && line[i] != '"'; i++ {
				switch d := line[i]; {
				case d == '`' || d == '$' && i+1 < len(line) && line[i+1] == '(':
					return nil, ErrSubstitution
				case d == '\\' && i+1 < len(line) && strings.IndexByte("$`\"\\\n", line[i+1]) >= 0:
					i++
					if line[i] != '\n' {
						cur.WriteByte(line[i])
					}
				default:
					cur.WriteByte(d)
				}
			}
			if i >= len(line) {
				return nil, ErrUnterminatedQuote
			}
			inWord, digits = true, false
		case c == '`' || c == '$' && i+1 < len(line) && line[i+1] == '(':
			return nil, ErrSubstitution
		case strings.IndexByte("|&;()<>", c) >= 0:
			op := operatorAt(line[i:])
			i += len(op) - 1
			if digits && (op[0] == '<' || op[0] == '>') {
				op = cur.String() + op // 2>, 2>>, 2>&
				cur.Reset()
				inWord, digits = false, false
			}
			flush()
			words = append(words, op)
		default:
			digits = (!inWord || digits) && c >= '0' && c <= '9'
			cur.WriteByte(c)
			inWord = true
		}
	}
	flush()
	return words, nil
}

// operators, longest first so that the first match is the longest.
var operators = []string{
	"&>>", "<<<", ">>", "<<", "<>", ">|", ">&", "<&", "&>", "&&", "||", "|&", ";;",
	"|", "&", ";", "(", ")", "<", ">",
}

func operatorAt(s string) string {
	for _, op := range operators {
		if strings.HasPrefix(s, op) {
			return op
		}
	}
	return s[:1]
}

// ClassifyCommand classifies running argv as a program runs it, with no
// shell in between: a read-only argv is an allow-listed program with
// allow-listed options (see readonly.go). A shell called with -c (bash -c
// LINE, sh -lc LINE) is judged by its command line (ClassifyShell). The
// approval key is the program's name.
func ClassifyCommand(argv []string) Class {
	c := Class{Effect: EffectCommand, Command: argv}
	if len(argv) == 3 && isShell(argv[0]) && (argv[1] == "-c" || argv[1] == "-lc" || argv[1] == "-cl") {
		ic := ClassifyShell(argv[2])
		c.Key, c.ReadOnlyCommand = ic.Key, ic.ReadOnlyCommand
		return c
	}
	if len(argv) == 0 {
		return c
	}
	c.Key = argv[0]
	c.ReadOnlyCommand = !strings.ContainsRune(argv[0], '/') && judge(programs, argv[0], argv[1:])
	return c
}

func isShell(prog string) bool {
	switch filepath.Base(prog) {
	case "bash", "sh", "zsh", "dash":
		return true
	}
	return false
}
