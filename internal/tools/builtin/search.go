package builtin

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"regexp"
	"strings"

	"github.com/agentwire/agentwire/internal/tools"
	"github.com/agentwire/agentwire/internal/tools/sandbox"
)

// Limits of the search tools.
const (
	globMaxResults = 1000
	grepMaxMatches = 500
	grepMaxLineLen = 300
	grepMaxFile    = 10 << 20
	walkMaxEntries = 200_000
	maxBraceExpand = 64
)

// errWalkLimit stops a walk that has seen too many entries.
var errWalkLimit = errors.New("walk limit")

// walk visits the regular files (and links to them) under base, a path
// relative to the working folder, skipping .git folders unless keepGit.
// visit receives slash-separated paths relative to the working folder.
// It reports whether the walk stopped early at its entry limit.
func walk(ctx context.Context, root *sandbox.Root, base string, keepGit bool, visit func(fsys fs.FS, name string) error) (truncated bool, err error) {
	rel, err := root.Resolve(base)
	if err != nil {
		return false, err
	}
	fsys, seen := root.FS(), 0
	err = fs.WalkDir(fsys, sandbox.Display(rel), func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			if name == sandbox.Display(rel) {
				return err
			}
			return nil // unreadable entries are skipped
		}
		if seen++; seen > walkMaxEntries {
			return errWalkLimit
		}
		if seen%256 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		if d.IsDir() {
			if d.Name() == ".git" && !keepGit && name != "." {
				return fs.SkipDir
			}
			return nil
		}
		return visit(fsys, name)
	})
	if errors.Is(err, errWalkLimit) {
		return true, nil
	}
	return false, err
}

// within returns name relative to base (both slash-separated, relative to
// the working folder).
func within(base, name string) string {
	if base == "." {
		return name
	}
	return strings.TrimPrefix(strings.TrimPrefix(name, base), "/")
}

type globArgs struct {
	Pattern string `json:"pattern"`
	Path    string `json:"path"`
}

func globTool(root *sandbox.Root) tools.Tool {
	return &tool[globArgs]{
		name: "glob",
		desc: "Find files by name pattern, relative to path (default the working folder). '*' and '?' match within a path element, '**' matches any number of folders, {a,b} matches either: \"**/*.go\" finds Go files everywhere, \"*.go\" only at the top.",
		schema: `{"type":"object","properties":{` +
			`"pattern":{"type":"string","description":"Glob pattern, e.g. \"src/**/*.{ts,tsx}\""},` +
			`"path":{"type":"string","description":"Folder to search from (default \".\")"}},` +
			`"required":["pattern"],"additionalProperties":false}`,
		max: tools.EffectRead,
		run: func(ctx context.Context, a globArgs, _ tools.Output) (tools.Result, error) {
			pats, err := compileGlob(a.Pattern)
			if err != nil {
				return fail(err), nil
			}
			base := cmpOr(a.Path, ".")
			rel, err := root.Resolve(base)
			if err != nil {
				return fsFail(base, err), nil
			}
			base = sandbox.Display(rel)
			var found []string
			more := false
			truncated, err := walk(ctx, root, base, strings.Contains(a.Pattern, ".git"), func(_ fs.FS, name string) error {
				if pats.match(within(base, name)) {
					if len(found) == globMaxResults {
						more = true
						return fs.SkipAll
					}
					found = append(found, name)
				}
				return nil
			})
			if err != nil {
				if ctx.Err() != nil {
					return tools.Result{}, ctx.Err()
				}
				return fsFail(base, err), nil
			}
			if len(found) == 0 {
				return ok("No files match %q.", a.Pattern), nil
			}
			out := strings.Join(found, "\n")
			if more {
				out += fmt.Sprintf("\n[only the first %d matches are shown; narrow the pattern]", globMaxResults)
			}
			if truncated {
				out += "\n[the search stopped early in a very large tree; narrow path]"
			}
			return ok("%s", out), nil
		},
	}
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// globSet is a pattern after brace expansion, each split into elements.
type globSet [][]string

func compileGlob(pattern string) (globSet, error) {
	if pattern == "" {
		return nil, errors.New("pattern is required")
	}
	if strings.HasPrefix(pattern, "/") {
		return nil, fmt.Errorf("pattern %q must be relative; use path to choose where to search", pattern)
	}
	alts, err := expandBraces(pattern)
	if err != nil {
		return nil, err
	}
	var set globSet
	for _, p := range alts {
		elems := strings.Split(path.Clean(p), "/")
		for _, e := range elems {
			if e == ".." {
				return nil, fmt.Errorf("pattern %q must not climb out with \"..\"", pattern)
			}
			if _, err := path.Match(e, ""); err != nil {
				return nil, fmt.Errorf("pattern %q: %v", pattern, err)
			}
		}
		set = append(set, elems)
	}
	return set, nil
}

// match reports whether name (slash-separated) matches any pattern.
func (s globSet) match(name string) bool {
	elems := strings.Split(name, "/")
	for _, p := range s {
		if matchElems(p, elems) {
			return true
		}
	}
	return false
}

func matchElems(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for len(pat) > 1 && pat[1] == "**" {
				pat = pat[1:]
			}
			for i := 0; i <= len(name); i++ {
				if matchElems(pat[1:], name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], name[0]); !ok {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(name) == 0
}

// expandBraces expands the first {a,b,...} group of p (and, recursively, the
// rest). Braces without a comma are literal.
func expandBraces(p string) ([]string, error) {
	open := strings.IndexByte(p, '{')
	if open < 0 {
		return []string{p}, nil
	}
	depth, closeAt := 0, -1
	var commas []int
	for i := open; i < len(p) && closeAt < 0; i++ {
		switch p[i] {
		case '{':
			depth++
		case '}':
			if depth--; depth == 0 {
				closeAt = i
			}
		case ',':
			if depth == 1 {
				commas = append(commas, i)
			}
		}
	}
	if closeAt < 0 {
		return nil, fmt.Errorf("pattern %q: unbalanced '{'", p)
	}
	prefix, suffix := p[:open], p[closeAt+1:]
	if len(commas) == 0 {
		rest, err := expandBraces(suffix)
		if err != nil {
			return nil, err
		}
		out := make([]string, len(rest))
		for i, r := range rest {
			out[i] = prefix + p[open:closeAt+1] + r
		}
		return out, nil
	}
	var out []string
	start := open + 1
	for _, end := range append(commas, closeAt) {
		alts, err := expandBraces(prefix + p[start:end] + suffix)
		if err != nil {
			return nil, err
		}
		out = append(out, alts...)
		if len(out) > maxBraceExpand {
			return nil, fmt.Errorf("pattern %q expands to too many alternatives", p)
		}
		start = end + 1
	}
	return out, nil
}

type grepArgs struct {
	Pattern    string `json:"pattern"`
	Path       string `json:"path"`
	Glob       string `json:"glob"`
	IgnoreCase bool   `json:"ignore_case"`
}

func grepTool(root *sandbox.Root) tools.Tool {
	return &tool[grepArgs]{
		name: "grep",
		desc: "Search file contents with a regular expression (RE2 syntax) under path (a folder or one file; default the working folder). Prints path:line:text for each matching line. Binary files and .git are skipped.",
		schema: `{"type":"object","properties":{` +
			`"pattern":{"type":"string","description":"Regular expression"},` +
			`"path":{"type":"string","description":"Folder or file to search (default \".\")"},` +
			`"glob":{"type":"string","description":"Only files whose name matches, e.g. \"*.go\" (a pattern with '/' matches the path)"},` +
			`"ignore_case":{"type":"boolean"}},` +
			`"required":["pattern"],"additionalProperties":false}`,
		max: tools.EffectRead,
		run: func(ctx context.Context, a grepArgs, _ tools.Output) (tools.Result, error) {
			expr := a.Pattern
			if a.IgnoreCase {
				expr = "(?i)" + expr
			}
			re, err := regexp.Compile(expr)
			if err != nil || a.Pattern == "" {
				return failf("invalid pattern %q: %v", a.Pattern, err), nil
			}
			var filter globSet
			if a.Glob != "" {
				if filter, err = compileGlob(a.Glob); err != nil {
					return fail(err), nil
				}
			}
			base := cmpOr(a.Path, ".")
			rel, err := root.Resolve(base)
			if err != nil {
				return fsFail(base, err), nil
			}
			base = sandbox.Display(rel)
			g := &grepper{re: re}
			truncated, err := walk(ctx, root, base, false, func(fsys fs.FS, name string) error {
				if filter != nil {
					subject := within(base, name)
					if !strings.Contains(a.Glob, "/") {
						subject = path.Base(name)
					}
					if !filter.match(subject) {
						return nil
					}
				}
				return g.file(fsys, name)
			})
			if err != nil && !errors.Is(err, fs.SkipAll) {
				if ctx.Err() != nil {
					return tools.Result{}, ctx.Err()
				}
				return fsFail(base, err), nil
			}
			if g.n == 0 {
				return ok("No matches for %q.", a.Pattern), nil
			}
			if g.more {
				fmt.Fprintf(&g.out, "[only the first %d matches are shown; narrow the search]\n", grepMaxMatches)
			}
			if truncated {
				g.out.WriteString("[the search stopped early in a very large tree; narrow path]\n")
			}
			return ok("%s", strings.TrimSuffix(g.out.String(), "\n")), nil
		},
	}
}

type grepper struct {
	re   *regexp.Regexp
	out  strings.Builder
	n    int
	more bool
}

// file searches one file; it returns fs.SkipAll once the match limit is hit.
func (g *grepper) file(fsys fs.FS, name string) error {
	f, err := fsys.Open(name)
	if err != nil {
		return nil // a link leading out, a file gone meanwhile: skip
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Size() > grepMaxFile {
		return nil
	}
	br := bufio.NewReaderSize(f, 64<<10)
	if head, _ := br.Peek(sniffLen); binary(head) {
		return nil
	}
	for line := 1; ; line++ {
		text, err := br.ReadString('\n')
		if text == "" && err != nil {
			return nil
		}
		text = strings.TrimRight(text, "\r\n")
		if g.re.MatchString(text) {
			if g.n == grepMaxMatches {
				g.more = true
				return fs.SkipAll
			}
			g.n++
			if len(text) > grepMaxLineLen {
				text = strings.ToValidUTF8(text[:grepMaxLineLen], "") + "…"
			}
			fmt.Fprintf(&g.out, "%s:%d:%s\n", name, line, text)
		}
		if err == io.EOF {
			return nil
		}
	}
}
