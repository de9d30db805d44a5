package tools

import (
	"errors"
	"path/filepath"
	"regexp"
	"slices"
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
// globs are left as written. It exists to classify commands, so it refuses
// what it cannot see through: command substitution (ErrSubstitution) and
// unbalanced quotes (ErrUnterminatedQuote).
//
// A quoted operator ("|") comes out as the same word as a real one, so
// classification treats it as one: the safe mistake.
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

// controlOps separate commands.
var controlOps = []string{"|", "||", "|&", "&", "&&", ";", ";;"}

// redirectOp returns the operator of a redirection word ("2>" -> ">"), or
// "" if w is not one.
func redirectOp(w string) string {
	op := strings.TrimLeft(w, "0123456789")
	switch op {
	case "<", ">", ">>", ">|", "<<", "<<<", "<>", ">&", "<&", "&>", "&>>":
		if op != w && (op == "&>" || op == "&>>") {
			return "" // 2&> is not a redirection
		}
		return op
	}
	return ""
}

// ClassifyCommand classifies running argv. A command is read-only when
// every command in it (argv may be a whole shell line split by SplitCommand,
// or ["bash", "-c", line]) is a known read-only program used in a read-only
// way, and nothing is redirected into a file other than /dev/null. The
// approval key is the program name when every command in it runs the same
// program and nothing is written through a redirection; otherwise it is ""
// and such a call can never be approved for good.
func ClassifyCommand(argv []string) Class {
	c := Class{Effect: EffectCommand, Command: argv}
	if len(argv) == 3 && isShell(argv[0]) && (argv[1] == "-c" || argv[1] == "-lc" || argv[1] == "-cl") {
		inner, err := SplitCommand(argv[2])
		if err != nil {
			return c
		}
		ic := ClassifyCommand(inner)
		c.Key, c.ReadOnlyCommand = ic.Key, ic.ReadOnlyCommand
		return c
	}
	readOnly, key, noKey, seen := true, "", false, false
	for seg := range segments(argv) {
		words, ok := stripRedirections(seg)
		if !ok {
			readOnly, noKey = false, true
		}
		if len(words) == 0 {
			continue
		}
		if slices.ContainsFunc(words, func(w string) bool { return w == "(" || w == ")" }) {
			// A subshell or function: not a simple command.
			readOnly, noKey = false, true
			continue
		}
		if !seen {
			key = words[0]
			seen = true
		} else if words[0] != key {
			key = ""
		}
		if !readOnlyCommand(words) {
			readOnly = false
		}
	}
	if !seen {
		return c
	}
	if !noKey {
		c.Key = key
	}
	c.ReadOnlyCommand = readOnly
	return c
}

func isShell(prog string) bool {
	switch filepath.Base(prog) {
	case "bash", "sh", "zsh", "dash":
		return true
	}
	return false
}

// segments yields the commands of argv between control operators. A
// subshell's parentheses stay in their segment (and make it unknown).
func segments(argv []string) func(yield func([]string) bool) {
	return func(yield func([]string) bool) {
		start := 0
		for i, w := range argv {
			if slices.Contains(controlOps, w) {
				if !yield(argv[start:i]) {
					return
				}
				start = i + 1
			}
		}
		yield(argv[start:])
	}
}

// stripRedirections returns seg without its redirections. ok is false when
// one writes to a file (other than /dev/null) or cannot be understood.
func stripRedirections(seg []string) (words []string, ok bool) {
	ok = true
	for i := 0; i < len(seg); i++ {
		op := redirectOp(seg[i])
		if op == "" {
			words = append(words, seg[i])
			continue
		}
		if i+1 >= len(seg) {
			return words, false
		}
		target := seg[i+1]
		i++
		switch op {
		case "<", "<<<":
			// Reading a file or a string.
		case ">&", "<&":
			if strings.Trim(target, "0123456789") != "" && target != "-" {
				ok = false // ">& file" writes the file
			}
		case "<<":
			ok = false // a here-document's body is not words
		default:
			if target != "/dev/null" {
				ok = false
			}
		}
	}
	return words, ok
}

var assignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// readOnlyCommand reports whether one simple command (no operators left)
// is a known read-only program with arguments that keep it so.
func readOnlyCommand(words []string) bool {
	prog, args := words[0], words[1:]
	if assignment.MatchString(prog) || strings.ContainsRune(prog, '/') {
		return false // FOO=bar cmd can inject behaviour; ./ls is anyone's
	}
	switch prog {
	case "ls", "cat", "head", "tail", "wc", "pwd", "echo", "grep", "egrep", "fgrep",
		"stat", "which", "du", "df", "true", "false", "nl", "cd",
		"cut", "tr", "basename", "dirname", "realpath", "readlink", "diff", "cmp", "printf":
		return true
	case "sort":
		// -o writes its output to a file; --compress-program runs one.
		return !hasFlag(args, "-o", "--output") && !hasFlag(args, "", "--compress-program")
	case "uniq":
		// uniq IN OUT writes OUT.
		operands := 0
		for _, a := range args {
			if !strings.HasPrefix(a, "-") || a == "-" {
				operands++
			}
		}
		return operands <= 1
	case "tree":
		return !hasFlag(args, "-o", "")
	case "file":
		return !hasFlag(args, "-C", "--compile")
	case "date":
		for _, a := range args {
			if a == "-s" || strings.HasPrefix(a, "--set") || !strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "+") {
				return false
			}
		}
		return true
	case "rg":
		for _, a := range args {
			if strings.HasPrefix(a, "--pre") || strings.HasPrefix(a, "--hostname-bin") || a == "--search-zip" ||
				len(a) > 1 && a[0] == '-' && a[1] != '-' && strings.ContainsRune(a, 'z') {
				return false
			}
		}
		return true
	case "find":
		for _, a := range args {
			switch a {
			case "-exec", "-execdir", "-ok", "-okdir", "-delete", "-fls", "-fprint", "-fprint0", "-fprintf":
				return false
			}
		}
		return true
	case "sed":
		return readOnlySed(args)
	case "git":
		return readOnlyGit(args)
	}
	return false
}

// hasFlag reports whether args has the short flag (possibly in a cluster,
// "-xo") or the long one (possibly "--long=value").
func hasFlag(args []string, short, long string) bool {
	for _, a := range args {
		if long != "" && (a == long || strings.HasPrefix(a, long+"=")) {
			return true
		}
		if short != "" && len(a) > 1 && a[0] == '-' && a[1] != '-' && strings.ContainsRune(a[1:], rune(short[1])) {
			return true
		}
	}
	return false
}

// sedPrint is the only sed script allowed: print a line or a range of
// lines ("10p", "1,20p", "$p"). Any other script might write (w) or run
// (e) something.
var sedPrint = regexp.MustCompile(`^\s*(\d+|\$)(\s*,\s*(\d+|\$))?\s*p\s*$`)

func readOnlySed(args []string) bool {
	quiet := false
	var scripts, operands []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-n" || a == "--quiet" || a == "--silent":
			quiet = true
		case a == "-e" || a == "--expression":
			if i+1 >= len(args) {
				return false
			}
			i++
			scripts = append(scripts, args[i])
		case strings.HasPrefix(a, "--expression="):
			scripts = append(scripts, strings.TrimPrefix(a, "--expression="))
		case a == "-E" || a == "-r" || a == "--regexp-extended" || a == "-s" || a == "--separate" || a == "-u" || a == "-z":
		case len(a) > 1 && a[0] == '-':
			// A cluster of harmless short flags (-nE), perhaps ending in
			// -e and its script (-ne 5p).
			flags, script := a[1:], strings.HasSuffix(a, "e")
			if script {
				flags = flags[:len(flags)-1]
			}
			if a[1] == '-' || strings.Trim(flags, "nErsuz") != "" {
				return false // -i, -f file, --in-place, --file, ...
			}
			if strings.ContainsRune(flags, 'n') {
				quiet = true
			}
			if script {
				if i+1 >= len(args) {
					return false
				}
				i++
				scripts = append(scripts, args[i])
			}
		default:
			operands = append(operands, a)
		}
	}
	if len(scripts) == 0 {
		if len(operands) == 0 {
			return false
		}
		scripts = operands[:1]
	}
	for _, s := range scripts {
		if !sedPrint.MatchString(s) {
			return false
		}
	}
	return quiet
}

func readOnlyGit(args []string) bool {
	for len(args) > 0 && args[0] == "--no-pager" {
		args = args[1:]
	}
	if len(args) == 0 {
		return false
	}
	sub, rest := args[0], args[1:]
	for _, a := range rest {
		if strings.HasPrefix(a, "--output") || a == "--ext-diff" || strings.HasPrefix(a, "--exec") {
			return false
		}
	}
	switch sub {
	case "status", "log", "diff", "show", "rev-parse", "ls-files", "blame":
		return true
	case "branch":
		listing := false
		var positional bool
		for _, a := range rest {
			switch {
			case a == "-a" || a == "--all" || a == "-r" || a == "--remotes" || a == "-l" || a == "--list" ||
				a == "--contains" || a == "--no-contains" || a == "--merged" || a == "--no-merged" || a == "--points-at" ||
				strings.HasPrefix(a, "--contains=") || strings.HasPrefix(a, "--merged=") || strings.HasPrefix(a, "--no-merged=") ||
				strings.HasPrefix(a, "--points-at=") || strings.HasPrefix(a, "--no-contains="):
				listing = true
			case a == "-v" || a == "-vv" || a == "--verbose" || a == "--show-current" || a == "--no-color" ||
				a == "--color" || strings.HasPrefix(a, "--color=") || strings.HasPrefix(a, "--sort=") ||
				strings.HasPrefix(a, "--format=") || a == "--column" || a == "--no-column" || a == "-i" || a == "--ignore-case":
			case strings.HasPrefix(a, "-"):
				return false // -d, -D, -m, -M, -c, -C, -f, -u, --set-upstream-to, ...
			default:
				positional = true
			}
		}
		return listing || !positional
	}
	return false
}
