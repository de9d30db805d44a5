package tools

import (
	"regexp"
	"strings"
)

// This file is the allow-list of programs a command may run without
// asking: each known to only read, with the options that keep it so.
// Options are matched exactly as written here, never by prefix: GNU
// getopt and git take any unique prefix of a long option (`sort --outp`
// is `sort --output`), so a prefix this list does not spell out is
// refused, not guessed at. A program or option missing from the list is
// not forbidden; it only asks first.

// argKind says whether an option takes an argument.
type argKind int

const (
	noArg  argKind = iota
	reqArg         // --name=value or --name value; -x value or -xvalue
	optArg         // --name[=value]; -x[value], attached only
)

// options describes a program's options in getopt's terms.
type options struct {
	// short holds the single-letter options, getopt style: "ab" take no
	// argument, "n:" requires one, "u::" takes an optional attached one.
	short string
	// long holds the long options, without the dashes: "all" takes no
	// argument, "lines=" requires one, "color?" takes an optional one
	// (only as --color=value).
	long map[string]argKind
	// numeric accepts -N, a count (head -20, git log -5).
	numeric bool
}

// longs builds an options.long map from names marked as described there.
func longs(names ...string) map[string]argKind {
	m := make(map[string]argKind, len(names))
	for _, n := range names {
		switch {
		case strings.HasSuffix(n, "="):
			m[strings.TrimSuffix(n, "=")] = reqArg
		case strings.HasSuffix(n, "?"):
			m[strings.TrimSuffix(n, "?")] = optArg
		default:
			m[n] = noArg
		}
	}
	return m
}

func (o *options) shortKind(c byte) (argKind, bool) {
	i := strings.IndexByte(o.short, c)
	if i < 0 || c == ':' {
		return 0, false
	}
	switch {
	case strings.HasPrefix(o.short[i+1:], "::"):
		return optArg, true
	case strings.HasPrefix(o.short[i+1:], ":"):
		return reqArg, true
	}
	return noArg, true
}

// flag is one option as given: its name ("-n", "--lines") and value.
type flag struct {
	name, value string
}

// parse splits args into options and operands as GNU getopt would (an
// option may follow an operand; "--" ends the options). ok is false when
// an option is not in o, or lacks its argument.
func (o *options) parse(args []string) (flags []flag, operands []string, ok bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return flags, append(operands, args[i+1:]...), true
		case strings.HasPrefix(a, "--"):
			name, value, hasValue := strings.Cut(a[2:], "=")
			kind, known := o.long[name]
			if !known {
				return nil, nil, false
			}
			switch kind {
			case noArg:
				if hasValue {
					return nil, nil, false
				}
			case reqArg:
				if !hasValue {
					if i+1 >= len(args) {
						return nil, nil, false
					}
					i++
					value = args[i]
				}
			}
			flags = append(flags, flag{"--" + name, value})
		case len(a) > 1 && a[0] == '-':
			if o.numeric && digits(a[1:]) {
				flags = append(flags, flag{"-", a[1:]})
				continue
			}
		cluster:
			for j := 1; j < len(a); j++ {
				kind, known := o.shortKind(a[j])
				if !known {
					return nil, nil, false
				}
				name := "-" + a[j:j+1]
				switch kind {
				case noArg:
					flags = append(flags, flag{name, ""})
				case optArg:
					flags = append(flags, flag{name, a[j+1:]})
					break cluster
				case reqArg:
					value := a[j+1:]
					if value == "" {
						if i+1 >= len(args) {
							return nil, nil, false
						}
						i++
						value = args[i]
					}
					flags = append(flags, flag{name, value})
					break cluster
				}
			}
		default:
			operands = append(operands, a)
		}
	}
	return flags, operands, true
}

func digits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// program is a program the classifier knows: its options, and a check of
// what they and its operands do, when options alone do not say.
type program struct {
	opts *options
	// ok judges the parsed call; nil accepts any that parses.
	ok func(flags []flag, operands []string) bool
	// raw judges the arguments itself instead (echo, printf, find, sed,
	// git), when getopt's model does not fit.
	raw func(args []string) bool
}

func anyArgs([]string) bool { return true }

func atMost(n int) func([]flag, []string) bool {
	return func(_ []flag, operands []string) bool { return len(operands) <= n }
}

var lsOpts = &options{
	short: "aAbBcCdfFgGhHiklLmnNopqQrRsStuUvxXZ1I:T:w:",
	long: longs("all", "almost-all", "author", "escape", "block-size=", "ignore-backups", "directory",
		"dired", "classify?", "file-type", "format=", "full-time", "group-directories-first", "no-group",
		"human-readable", "si", "dereference-command-line", "dereference-command-line-symlink-to-dir",
		"hide=", "hyperlink?", "indicator-style=", "inode", "ignore=", "kibibytes", "dereference",
		"numeric-uid-gid", "literal", "hide-control-chars", "show-control-chars", "quote-name",
		"quoting-style=", "reverse", "recursive", "size", "sort=", "time=", "time-style=", "tabsize=",
		"width=", "context", "zero", "color?", "help", "version"),
}

var headOpts = &options{
	short:   "qvzn:c:",
	long:    longs("bytes=", "lines=", "quiet", "silent", "verbose", "zero-terminated", "help", "version"),
	numeric: true,
}

var grepOpts = &options{
	short: "EFGPiywxvcLloqsbHhnTZzrRaIUe:f:m:A:B:C:d:D:",
	long: longs("extended-regexp", "fixed-strings", "basic-regexp", "perl-regexp", "regexp=", "file=",
		"ignore-case", "no-ignore-case", "word-regexp", "line-regexp", "null-data", "no-messages",
		"invert-match", "version", "help", "max-count=", "byte-offset", "line-number", "no-line-number",
		"line-buffered", "with-filename", "no-filename", "label=", "only-matching", "quiet", "silent",
		"binary-files=", "text", "directories=", "devices=", "recursive", "dereference-recursive",
		"include=", "exclude=", "exclude-from=", "exclude-dir=", "files-without-match",
		"files-with-matches", "count", "initial-tab", "null", "before-context=", "after-context=",
		"context=", "color?", "colour?", "binary"),
	numeric: true,
}

// programs is the allow-list, by the name a command line calls them.
var programs = map[string]program{
	"ls":  {opts: lsOpts},
	"cat": {opts: &options{short: "AbeEnstTuv", long: longs("show-all", "number-nonblank", "show-ends", "number", "squeeze-blank", "show-tabs", "show-nonprinting", "help", "version")}},
	// tail without -f: following a file never ends.
	"head":     {opts: headOpts},
	"tail":     {opts: headOpts},
	"wc":       {opts: &options{short: "clmwL", long: longs("bytes", "chars", "lines", "words", "max-line-length", "total=", "help", "version")}},
	"pwd":      {opts: &options{short: "LP"}, ok: atMost(0)},
	"cd":       {opts: &options{short: "LP"}, ok: atMost(1)},
	"true":     {raw: anyArgs},
	"false":    {raw: anyArgs},
	"echo":     {raw: anyArgs},
	"printf":   {raw: printfReadOnly},
	"grep":     {opts: grepOpts},
	"egrep":    {opts: grepOpts},
	"fgrep":    {opts: grepOpts},
	"basename": {opts: &options{short: "azs:", long: longs("multiple", "suffix=", "zero", "help", "version")}},
	"dirname":  {opts: &options{short: "z", long: longs("zero", "help", "version")}},
	"realpath": {opts: &options{short: "eLmPqsz", long: longs("canonicalize-existing", "canonicalize-missing", "logical", "physical", "quiet", "relative-to=", "relative-base=", "strip", "no-symlinks", "zero", "help", "version")}},
	"readlink": {opts: &options{short: "efmnqsvz", long: longs("canonicalize", "canonicalize-existing", "canonicalize-missing", "no-newline", "quiet", "silent", "verbose", "zero", "help", "version")}},
	"cut":      {opts: &options{short: "nszb:c:d:f:", long: longs("bytes=", "characters=", "delimiter=", "fields=", "complement", "only-delimited", "output-delimiter=", "zero-terminated", "help", "version")}},
	"tr":       {opts: &options{short: "cCdst", long: longs("complement", "delete", "squeeze-repeats", "truncate-set1", "help", "version")}},
	"nl":       {opts: &options{short: "pb:d:f:h:i:l:n:s:v:w:", long: longs("help", "version")}},
	"stat":     {opts: &options{short: "LftZc:", long: longs("dereference", "file-system", "terse", "format=", "printf=", "cached=", "help", "version")}},
	"which":    {opts: &options{short: "a"}},
	"du": {opts: &options{short: "abcDhHklLmsSxP0d:B:t:", long: longs("all", "apparent-size", "block-size=", "bytes", "total",
		"dereference-args", "human-readable", "inodes", "dereference", "count-links", "max-depth=", "null", "no-dereference",
		"separate-dirs", "si", "summarize", "threshold=", "time?", "time-style=", "exclude=", "exclude-from=", "one-file-system", "help", "version")}},
	"df": {opts: &options{short: "ahHiklPTvB:t:x:", long: longs("all", "block-size=", "human-readable", "si", "inodes", "local",
		"output?", "portability", "print-type", "total", "type=", "exclude-type=", "help", "version")}},
	"diff": {opts: &options{short: "abBdEiNpqrsStTuwyC:U:I:x:X:S:F:W:", long: longs("normal", "brief", "report-identical-files",
		"context?", "unified?", "side-by-side", "left-column", "suppress-common-lines", "show-c-function",
		"show-function-line=", "label=", "expand-tabs", "initial-tab", "tabsize=", "suppress-blank-empty", "new-file",
		"unidirectional-new-file", "text", "strip-trailing-cr", "ignore-case", "ignore-tab-expansion",
		"ignore-trailing-space", "ignore-space-change", "ignore-all-space", "ignore-blank-lines",
		"ignore-matching-lines=", "recursive", "no-dereference", "exclude=", "exclude-from=", "starting-file=",
		"from-file=", "to-file=", "minimal", "speed-large-files", "horizon-lines=", "color?", "palette=", "width=",
		"no-ignore-file-name-case", "ignore-file-name-case", "help", "version")}},
	"cmp": {opts: &options{short: "blsi:n:", long: longs("print-bytes", "ignore-initial=", "verbose", "bytes=", "quiet", "silent", "help", "version")}},
	// sort without -o/--output (writes its output to a file), -T (temporary
	// files in a folder of the caller's choosing) and --compress-program
	// (runs a program).
	"sort": {opts: &options{short: "bdfgiMhnRrVcCsuzmk:t:S:", long: longs("ignore-leading-blanks", "dictionary-order", "ignore-case",
		"general-numeric-sort", "ignore-nonprinting", "month-sort", "human-numeric-sort", "numeric-sort", "random-sort",
		"reverse", "version-sort", "sort=", "check?", "merge", "key=", "field-separator=", "stable", "unique",
		"zero-terminated", "buffer-size=", "parallel=", "debug", "help", "version")}},
	// uniq's second operand is its output file.
	"uniq": {opts: &options{short: "cdDiuzf:s:w:", long: longs("count", "repeated", "all-repeated?", "ignore-case", "unique",
		"zero-terminated", "skip-fields=", "skip-chars=", "check-chars=", "group?", "help", "version")}, ok: atMost(1)},
	// date without -s/--set, and with no operand but a +FORMAT: any other
	// operand sets the clock.
	"date": {opts: &options{short: "uRd:f:r:I::", long: longs("date=", "file=", "iso-8601?", "rfc-email", "rfc-3339=",
		"reference=", "universal", "utc", "debug", "help", "version")}, ok: func(_ []flag, operands []string) bool {
		for _, o := range operands {
			if !strings.HasPrefix(o, "+") {
				return false
			}
		}
		return true
	}},
	"whoami": {opts: &options{long: longs("help", "version")}, ok: atMost(0)},
	"id":     {opts: &options{short: "gGnruz", long: longs("group", "groups", "name", "real", "user", "zero", "help", "version")}},
	"uname":  {opts: &options{short: "asnrvmpio", long: longs("all", "kernel-name", "nodename", "kernel-release", "kernel-version", "machine", "processor", "hardware-platform", "operating-system", "help", "version")}, ok: atMost(0)},
	// hostname NAME sets the host name.
	"hostname": {opts: &options{short: "sfidAI"}, ok: atMost(0)},
	// file without -C (writes a compiled magic file) and -z/-Z (may run
	// decompressors).
	"file":      {opts: &options{short: "bhiLNnprsk0", long: longs("brief", "mime", "mime-type", "mime-encoding", "dereference", "no-dereference", "no-pad", "print0", "raw", "special-files", "keep-going", "extension", "help", "version")}},
	"tree":      {opts: &options{short: "adfilpsughDFCnrtvQxNL:I:P:", long: longs("noreport", "dirsfirst", "gitignore", "charset=", "du", "prune", "filelimit=", "sort=", "help", "version")}},
	"md5sum":    {opts: sumOpts},
	"sha1sum":   {opts: sumOpts},
	"sha256sum": {opts: sumOpts},
	"sha512sum": {opts: sumOpts},
	"b2sum":     {opts: sumOpts},
	"rg":        {opts: rgOpts},
	"find":      {raw: findReadOnly},
	"sed":       {raw: sedReadOnly},
	"git":       {raw: gitReadOnly},
}

var sumOpts = &options{short: "bctwz", long: longs("binary", "check", "text", "tag", "zero", "quiet", "status", "strict", "warn", "ignore-missing", "help", "version")}

// rgOpts are ripgrep's, without --pre and --pre-glob (run a program on
// each file), -z/--search-zip (runs decompressors) and --hostname-bin.
var rgOpts = &options{
	short: "iISsFwxvcClLnNoqHhu.aUP0be:g:t:T:m:A:B:C:j:M:E:r:f:d:",
	long: longs("ignore-case", "smart-case", "case-sensitive", "fixed-strings", "word-regexp", "line-regexp",
		"invert-match", "count", "count-matches", "files-with-matches", "files-without-match", "line-number",
		"no-line-number", "only-matching", "quiet", "with-filename", "no-filename", "follow", "hidden", "no-hidden",
		"no-ignore", "no-ignore-vcs", "no-ignore-parent", "no-ignore-dot", "no-ignore-global", "no-ignore-exclude",
		"no-ignore-files", "text", "multiline", "multiline-dotall", "pcre2", "null", "vimgrep", "json", "files",
		"type-list", "heading", "no-heading", "column", "no-column", "byte-offset", "trim", "stats", "unrestricted",
		"regexp=", "glob=", "iglob=", "type=", "type-not=", "max-count=", "after-context=", "before-context=",
		"context=", "threads=", "max-columns=", "encoding=", "replace=", "file=", "max-depth=", "sort=", "sortr=",
		"color=", "colors=", "context-separator=", "field-match-separator=", "max-filesize=", "ignore-file=",
		"help", "version"),
}

// printfReadOnly refuses bash's printf -v, which assigns a variable and
// evaluates an array subscript in its name: `printf -v 'a[$(cmd)]'` runs
// cmd. Every other use only prints its (literal) arguments.
func printfReadOnly(args []string) bool {
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	return len(args) > 0 && !strings.HasPrefix(args[0], "-")
}

// findArgs are find's options and tests that only look, with how many
// arguments each takes. Its actions that run programs (-exec, -execdir,
// -ok, -okdir), delete (-delete) or write files (-fls, -fprint,
// -fprint0, -fprintf) are not here, nor is anything else.
var findArgs = map[string]int{
	"-H": 0, "-L": 0, "-P": 0,
	"-name": 1, "-iname": 1, "-path": 1, "-ipath": 1, "-wholename": 1, "-iwholename": 1,
	"-regex": 1, "-iregex": 1, "-regextype": 1, "-lname": 1, "-ilname": 1, "-type": 1, "-xtype": 1,
	"-size": 1, "-mtime": 1, "-mmin": 1, "-atime": 1, "-amin": 1, "-ctime": 1, "-cmin": 1,
	"-newer": 1, "-anewer": 1, "-cnewer": 1, "-used": 1, "-perm": 1, "-user": 1, "-group": 1,
	"-uid": 1, "-gid": 1, "-links": 1, "-inum": 1, "-samefile": 1, "-fstype": 1,
	"-maxdepth": 1, "-mindepth": 1, "-printf": 1,
	"-print": 0, "-print0": 0, "-ls": 0, "-prune": 0, "-quit": 0, "-true": 0, "-false": 0,
	"-empty": 0, "-readable": 0, "-writable": 0, "-executable": 0, "-nouser": 0, "-nogroup": 0,
	"-depth": 0, "-d": 0, "-xdev": 0, "-mount": 0, "-noleaf": 0, "-daystart": 0, "-follow": 0,
	"-ignore_readdir_race": 0, "-noignore_readdir_race": 0,
	"-not": 0, "-and": 0, "-or": 0, "-a": 0, "-o": 0, "!": 0, "(": 0, ")": 0, ",": 0,
	"-help": 0, "--help": 0, "-version": 0, "--version": 0,
}

var findNewer = regexp.MustCompile(`^-newer[aBcm][aBcmt]$`)

func findReadOnly(args []string) bool {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") && a != "!" && a != "(" && a != ")" && a != "," || a == "-" {
			continue // a starting point
		}
		n, ok := findArgs[a]
		if !ok && findNewer.MatchString(a) {
			n, ok = 1, true
		}
		if !ok || i+n >= len(args) {
			return false
		}
		i += n
	}
	return true
}

// sedReadOnly accepts sed -n whose scripts only print (p, =, l) or quit
// (q, Q), on line-number, $ or /regex/ addresses. Anything else may
// write (w, W, s///w), run a program (e, s///e) or edit in place (-i).
func sedReadOnly(args []string) bool {
	o := &options{short: "nEsuzr" + "e:l:", long: longs("quiet", "silent", "regexp-extended", "separate",
		"unbuffered", "null-data", "expression=", "line-length=", "posix", "sandbox", "debug", "help", "version")}
	flags, operands, ok := o.parse(args)
	if !ok {
		return false
	}
	quiet := false
	var scripts []string
	for _, f := range flags {
		switch f.name {
		case "-n", "--quiet", "--silent":
			quiet = true
		case "-e", "--expression":
			scripts = append(scripts, f.value)
		}
	}
	if len(scripts) == 0 {
		if len(operands) == 0 {
			return false
		}
		scripts = operands[:1]
	}
	for _, s := range scripts {
		if !sedPrints(s) {
			return false
		}
	}
	return quiet
}

// sedPrints reports whether a sed script is only print and quit commands.
func sedPrints(s string) bool {
	i := 0
	space := func() {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
	}
	for {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == ';' || s[i] == '\n') {
			i++
		}
		if i == len(s) {
			return true
		}
		if !sedAddress(s, &i, false) {
			return false
		}
		space()
		if i < len(s) && s[i] == ',' {
			i++
			space()
			if !sedAddress(s, &i, true) {
				return false
			}
			space()
		}
		if i < len(s) && s[i] == '!' {
			i++
			space()
		}
		if i == len(s) || strings.IndexByte("p=lqQ", s[i]) < 0 {
			return false
		}
		i++
		space()
		for i < len(s) && s[i] >= '0' && s[i] <= '9' { // q5, l 70
			i++
		}
		space()
		if i < len(s) && s[i] != ';' && s[i] != '\n' {
			return false
		}
	}
}

// sedAddress skips an optional address at s[*i]: N, N~M, $, /regex/ or
// \cregexc with I or M flags; second addresses may also be +N or ~N. It
// reports false for an address it cannot read.
func sedAddress(s string, i *int, second bool) bool {
	j := *i
	switch {
	case j < len(s) && s[j] >= '0' && s[j] <= '9':
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		if j < len(s) && s[j] == '~' {
			j++
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
		}
	case j < len(s) && s[j] == '$':
		j++
	case second && j < len(s) && (s[j] == '+' || s[j] == '~'):
		j++
		k := j
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		if j == k {
			return false
		}
	case j < len(s) && (s[j] == '/' || s[j] == '\\'):
		delim := byte('/')
		if s[j] == '\\' {
			if j+1 >= len(s) || s[j+1] == '\n' || s[j+1] == '\\' {
				return false
			}
			delim = s[j+1]
			j++
		}
		j++
		for ; j < len(s) && s[j] != delim; j++ {
			switch s[j] {
			case '\\':
				j++
			case '\n':
				return false
			}
		}
		if j >= len(s) {
			return false
		}
		j++
		for j < len(s) && (s[j] == 'I' || s[j] == 'M') {
			j++
		}
	case second:
		return false // a comma must be followed by an address
	}
	*i = j
	return true
}
