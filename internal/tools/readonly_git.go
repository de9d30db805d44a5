package tools

// git's subcommands that only read, with the options that keep them so.
// Global options (-c, -C, --git-dir, --exec-path, ...) are refused: -c
// alone sets a pager, an editor or an external diff. git takes unique
// prefixes of long options, so they are matched exactly (see readonly.go).
// Options that run a configured program (--ext-diff, --textconv,
// --show-signature, --open-files-in-pager) or write a file (--output)
// are left out.

// revOpts are the revision-walking and diff options of log, show, diff and
// shortlog.
var revOpts = &options{
	short: "puszwbRaWtmcEFPirgM::C::B::n:G:L:U:O:l:S:",
	long: longs(
		// revision walking
		"all", "branches?", "tags?", "remotes?", "glob=", "exclude=", "not", "reverse", "no-merges", "merges",
		"first-parent", "topo-order", "date-order", "author-date-order", "max-count=", "skip=", "since=", "after=",
		"until=", "before=", "author=", "committer=", "grep=", "all-match", "invert-grep", "regexp-ignore-case",
		"basic-regexp", "extended-regexp", "fixed-strings", "perl-regexp", "follow", "full-history",
		"simplify-by-decoration", "ancestry-path?", "cherry-pick", "cherry-mark", "left-right", "boundary",
		"no-walk?", "do-walk", "parents", "children", "walk-reflogs", "graph", "oneline", "format=", "pretty?",
		"abbrev-commit", "no-abbrev-commit", "abbrev?", "decorate?", "no-decorate", "source", "date=",
		"encoding=", "expand-tabs?", "no-expand-tabs", "log-size", "use-mailmap", "no-use-mailmap", "mailmap",
		"no-mailmap", "relative-date", "count",
		// diff output
		"patch", "no-patch", "raw", "stat?", "numstat", "shortstat", "dirstat?", "summary", "name-only",
		"name-status", "patch-with-stat", "patch-with-raw", "full-index", "binary", "check", "exit-code", "quiet",
		"minimal", "patience", "histogram", "diff-algorithm=", "ignore-all-space", "ignore-space-change",
		"ignore-space-at-eol", "ignore-blank-lines", "ignore-cr-at-eol", "function-context", "text",
		"no-renames", "find-renames?", "find-copies?", "find-copies-harder", "relative?", "no-relative",
		"color?", "no-color", "word-diff?", "word-diff-regex=", "color-words?", "color-moved?", "no-color-moved",
		"unified=", "inter-hunk-context=", "diff-filter=", "no-textconv", "no-ext-diff", "src-prefix=",
		"dst-prefix=", "no-prefix", "line-prefix=", "ignore-submodules?", "submodule?", "cached", "staged",
		"merge-base", "no-index", "irreversible-delete", "ita-invisible-in-index", "break-rewrites?",
		"compact-summary", "stat-width=", "stat-count=", "cc", "combined-all-paths", "dense-combined",
		"remerge-diff", "diff-merges=", "no-diff-merges", "show-pulls"),
	numeric: true,
}

var gitSubcommands = map[string]program{
	"log":      {opts: revOpts},
	"show":     {opts: revOpts},
	"diff":     {opts: revOpts},
	"shortlog": {opts: revOpts},
	"status": {opts: &options{short: "sbvzu::", long: longs("short", "branch", "porcelain?", "long", "verbose",
		"untracked-files?", "ignored?", "ignore-submodules?", "column?", "no-column", "ahead-behind",
		"no-ahead-behind", "renames", "no-renames", "find-renames?", "null", "show-stash")}},
	"rev-parse": {opts: &options{short: "q", long: longs("show-toplevel", "show-prefix", "show-cdup", "git-dir",
		"git-common-dir", "absolute-git-dir", "is-inside-work-tree", "is-inside-git-dir", "is-bare-repository",
		"is-shallow-repository", "abbrev-ref?", "short?", "verify", "quiet", "symbolic", "symbolic-full-name",
		"all", "branches?", "tags?", "remotes?", "show-object-format?", "show-superproject-working-tree")}},
	"ls-files": {opts: &options{short: "cdmoiskuztvfx:X:", long: longs("cached", "deleted", "modified", "others",
		"ignored", "stage", "killed", "unmerged", "directory", "no-empty-directory", "exclude-standard",
		"exclude=", "exclude-from=", "exclude-per-directory=", "error-unmatch", "full-name",
		"recurse-submodules", "abbrev?", "debug", "eol", "deduplicate", "sparse", "format=")}},
	"blame": {opts: &options{short: "bcfhlnpstewM::C::L:", long: longs("porcelain", "line-porcelain", "incremental",
		"root", "show-stats", "show-name", "show-number", "show-email", "date=", "abbrev?", "no-progress",
		"ignore-rev=", "ignore-revs-file=", "color-lines", "color-by-age", "minimal", "contents=",
		"first-parent", "encoding=", "score-debug")}},
	"describe": {opts: &options{long: longs("tags", "all", "always", "long", "abbrev?", "exact-match", "first-parent",
		"contains", "candidates=", "match=", "exclude=")}},
	"grep": {opts: &options{short: "inwvclLhHoEFPIae:f:A:B:C:m:", long: longs("ignore-case", "line-number", "column",
		"word-regexp", "invert-match", "count", "files-with-matches", "name-only", "files-without-match",
		"only-matching", "extended-regexp", "fixed-strings", "perl-regexp", "basic-regexp", "cached", "untracked",
		"no-index", "recurse-submodules", "heading", "break", "show-function", "function-context",
		"max-depth=", "max-count=", "and", "or", "not", "all-match", "full-name", "null", "text", "threads=",
		"before-context=", "after-context=", "context=", "color?", "no-color"), numeric: true}},
	"cat-file": {opts: &options{short: "ptse"}},
	"branch":   {raw: gitBranchReadOnly},
	"tag":      {raw: gitTagReadOnly},
	"remote":   {opts: &options{short: "v", long: longs("verbose")}, ok: atMost(0)},
	"config":   {raw: gitConfigReadOnly},
}

func gitReadOnly(args []string) bool {
	for len(args) > 0 && (args[0] == "--no-pager" || args[0] == "-P") {
		args = args[1:]
	}
	if len(args) == 0 {
		return false
	}
	return judge(gitSubcommands, args[0], args[1:])
}

// judge reports whether prog, called with args, is in the allow-list table
// and used as it allows.
func judge(table map[string]program, prog string, args []string) bool {
	p, known := table[prog]
	switch {
	case !known:
		return false
	case p.raw != nil:
		return p.raw(args)
	}
	flags, operands, ok := p.opts.parse(args)
	if !ok {
		return false
	}
	return p.ok == nil || p.ok(flags, operands)
}

// listing reports whether a git branch or tag call with flags and
// operands lists: it names no ref to create, move, copy or delete.
func listing(flags []flag, operands []string, listFlags ...string) bool {
	if len(operands) == 0 {
		return true
	}
	for _, f := range flags {
		for _, l := range listFlags {
			if f.name == l {
				return true // the operands are patterns
			}
		}
	}
	return false
}

var branchOpts = &options{short: "arlvi", long: longs("all", "remotes", "list", "verbose", "show-current",
	"no-color", "color?", "sort=", "format=", "column?", "no-column", "ignore-case", "contains?",
	"no-contains?", "merged?", "no-merged?", "points-at=", "abbrev=", "no-abbrev", "omit-empty")}

func gitBranchReadOnly(args []string) bool {
	flags, operands, ok := branchOpts.parse(args)
	return ok && listing(flags, operands, "-a", "--all", "-r", "--remotes", "-l", "--list", "--contains",
		"--no-contains", "--merged", "--no-merged", "--points-at")
}

var tagOpts = &options{short: "ln::i", long: longs("list", "sort=", "format=", "column?", "no-column",
	"contains?", "no-contains?", "merged?", "no-merged?", "points-at=", "ignore-case", "color?", "omit-empty")}

func gitTagReadOnly(args []string) bool {
	flags, operands, ok := tagOpts.parse(args)
	return ok && listing(flags, operands, "-l", "--list", "--contains", "--no-contains", "--merged",
		"--no-merged", "--points-at")
}

var configOpts = &options{short: "lz", long: longs("list", "get", "get-all", "get-regexp", "get-urlmatch",
	"show-origin", "show-scope", "local", "global", "system", "worktree", "name-only", "null", "type=",
	"bool", "int", "path", "includes", "no-includes", "default=")}

// gitConfigReadOnly accepts git config when it lists or gets: without a
// mode, git config NAME VALUE sets.
func gitConfigReadOnly(args []string) bool {
	flags, operands, ok := configOpts.parse(args)
	if !ok {
		return false
	}
	for _, f := range flags {
		switch f.name {
		case "-l", "--list":
			return len(operands) == 0
		case "--get", "--get-all", "--get-regexp", "--get-urlmatch":
			return len(operands) >= 1 && len(operands) <= 2
		}
	}
	return false
}
