package tools

import (
	"fmt"
	"regexp"
	"strings"
)

// The Codex patch envelope, the format of apply_patch:
//
//	*** Begin Patch
//	*** Add File: path
//	+line
//	*** Delete File: path
//	*** Update File: path
//	*** Move to: new/path
//	@@ a line to find first (optional)
//	 context
//	-removed
//	+added
//	*** End of File
//	*** End Patch
const (
	patchBegin  = "*** Begin Patch"
	patchEnd    = "*** End Patch"
	patchAdd    = "*** Add File:"
	patchDelete = "*** Delete File:"
	patchUpdate = "*** Update File:"
	patchMove   = "*** Move to:"
	patchEOF    = "*** End of File"
)

// PatchOp is what a patch does to one file.
type PatchOp int

// Patch operations.
const (
	PatchAdd PatchOp = iota + 1
	PatchDelete
	PatchUpdate
)

func (op PatchOp) String() string {
	switch op {
	case PatchAdd:
		return "add"
	case PatchDelete:
		return "delete"
	case PatchUpdate:
		return "update"
	}
	return fmt.Sprintf("PatchOp(%d)", int(op))
}

// Patch is a parsed patch: its file sections in order.
type Patch struct {
	Files []FilePatch
}

// FilePatch is one section of a patch.
type FilePatch struct {
	Op   PatchOp
	Path string
	// MoveTo, for an update, renames the file.
	MoveTo string
	// Content is an added file's content.
	Content string
	// Hunks are an update's changes, in file order.
	Hunks []Hunk
}

// Hunk is one change of an update: lines Old, found in the file, become New.
type Hunk struct {
	// Anchor is the line after "@@", found before Old is looked for (the
	// enclosing function, class, ...); "" if none.
	Anchor string
	Old    []string
	New    []string
	// AtEOF says Old ends the file ("*** End of File").
	AtEOF bool
	// Line is where the hunk starts in the patch (1-based), for errors.
	Line int
}

// unifiedRange matches a unified-diff hunk header's ranges, which some
// models write after "@@" ("@@ -1,3 +1,4 @@ func main"); they are ignored.
var unifiedRange = regexp.MustCompile(`^-\d+(,\d+)? \+\d+(,\d+)? @@ ?`)

// ParsePatch parses the Codex patch envelope. Errors name the patch line.
func ParsePatch(text string) (*Patch, error) {
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	// marker compares a line to a marker, ignoring surrounding blanks.
	marker := func(i int) string { return strings.TrimSpace(lines[i]) }
	i := 0
	for i < len(lines) && marker(i) == "" {
		i++
	}
	if i == len(lines) || marker(i) != patchBegin {
		return nil, fmt.Errorf("patch: the first line must be %q", patchBegin)
	}
	i++
	p := &Patch{}
	for {
		if i >= len(lines) {
			return nil, fmt.Errorf("patch: missing %q", patchEnd)
		}
		m, lineNo := marker(i), i+1
		if m == "" {
			i++
			continue
		}
		switch {
		case m == patchEnd:
			for i++; i < len(lines); i++ {
				if marker(i) != "" {
					return nil, fmt.Errorf("patch line %d: text after %q", i+1, patchEnd)
				}
			}
			if len(p.Files) == 0 {
				return nil, fmt.Errorf("patch: no file sections")
			}
			return p, nil
		case strings.HasPrefix(m, patchAdd):
			f := FilePatch{Op: PatchAdd, Path: strings.TrimSpace(m[len(patchAdd):])}
			var b strings.Builder
			for i++; i < len(lines) && !strings.HasPrefix(lines[i], "***"); i++ {
				if blankToMarker(lines[i:]) {
					break
				}
				if !strings.HasPrefix(lines[i], "+") {
					return nil, fmt.Errorf("patch line %d: in Add File %s, every line must start with '+': %q", i+1, f.Path, lines[i])
				}
				b.WriteString(lines[i][1:])
				b.WriteByte('\n')
			}
			f.Content = b.String()
			p.Files = append(p.Files, f)
		case strings.HasPrefix(m, patchDelete):
			p.Files = append(p.Files, FilePatch{Op: PatchDelete, Path: strings.TrimSpace(m[len(patchDelete):])})
			i++
		case strings.HasPrefix(m, patchUpdate):
			f := FilePatch{Op: PatchUpdate, Path: strings.TrimSpace(m[len(patchUpdate):])}
			i++
			if i < len(lines) && strings.HasPrefix(marker(i), patchMove) {
				f.MoveTo = strings.TrimSpace(marker(i)[len(patchMove):])
				if f.MoveTo == "" {
					return nil, fmt.Errorf("patch line %d: %q without a path", i+1, patchMove)
				}
				i++
			}
			var err error
			if f.Hunks, i, err = parseHunks(lines, i, f.Path); err != nil {
				return nil, err
			}
			if len(f.Hunks) == 0 && f.MoveTo == "" {
				return nil, fmt.Errorf("patch line %d: Update File %s has no changes", lineNo, f.Path)
			}
			p.Files = append(p.Files, f)
		default:
			return nil, fmt.Errorf("patch line %d: expected a file section (%q, %q or %q) or %q, got %q",
				lineNo, patchAdd, patchDelete, patchUpdate, patchEnd, lines[i])
		}
		if f := p.Files[len(p.Files)-1]; f.Path == "" {
			return nil, fmt.Errorf("patch line %d: a file section without a path", lineNo)
		}
	}
}

// blankToMarker reports whether lines are blank up to the next marker (or
// the end): blank lines between sections are layout, not content.
func blankToMarker(lines []string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l, "***") {
			return true
		}
		if strings.TrimSpace(l) != "" {
			return false
		}
	}
	return true
}

// parseHunks reads an update's hunks from lines[i:] up to the next section
// marker, and returns where it stopped.
func parseHunks(lines []string, i int, path string) ([]Hunk, int, error) {
	var hunks []Hunk
	var h *Hunk
	open := func(anchor string, line int) {
		hunks = append(hunks, Hunk{Anchor: anchor, Line: line})
		h = &hunks[len(hunks)-1]
	}
	closeHunk := func() error {
		if h != nil && len(h.Old) == 0 && len(h.New) == 0 {
			return fmt.Errorf("patch line %d: Update File %s: hunk %d is empty", h.Line, path, len(hunks))
		}
		return nil
	}
	for ; i < len(lines); i++ {
		l := lines[i]
		t := strings.TrimSpace(l)
		if t == patchEOF {
			if h == nil {
				return nil, 0, fmt.Errorf("patch line %d: %q outside a hunk", i+1, patchEOF)
			}
			h.AtEOF = true
			continue
		}
		if strings.HasPrefix(t, "*** ") {
			break // the next section, or the end
		}
		if strings.HasPrefix(l, "@@") {
			if err := closeHunk(); err != nil {
				return nil, 0, err
			}
			anchor := strings.TrimSpace(strings.TrimPrefix(l, "@@"))
			anchor = strings.TrimSpace(unifiedRange.ReplaceAllString(anchor, ""))
			open(anchor, i+1)
			continue
		}
		if h == nil {
			open("", i+1) // the first hunk may leave out its "@@"
		} else if h.AtEOF {
			return nil, 0, fmt.Errorf("patch line %d: Update File %s: lines after %q need a new \"@@\"", i+1, path, patchEOF)
		}
		switch {
		case l == "":
			// An empty context line whose leading space was lost.
			h.Old, h.New = append(h.Old, ""), append(h.New, "")
		case l[0] == ' ':
			h.Old, h.New = append(h.Old, l[1:]), append(h.New, l[1:])
		case l[0] == '-':
			h.Old = append(h.Old, l[1:])
		case l[0] == '+':
			h.New = append(h.New, l[1:])
		default:
			return nil, 0, fmt.Errorf("patch line %d: Update File %s: a hunk line must start with ' ', '-' or '+': %q", i+1, path, l)
		}
	}
	if err := closeHunk(); err != nil {
		return nil, 0, err
	}
	return hunks, i, nil
}

// Apply returns the content of an updated file given its current content.
// Each hunk is looked for after the previous one: its anchor line first
// (the whole line, else a line starting with it), then its old lines (exactly, else ignoring trailing blanks, else ignoring
// surrounding blanks). The result ends with a newline.
func (f FilePatch) Apply(old string) (string, error) {
	lines := strings.Split(old, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	type replacement struct {
		at, n int
		new   []string
	}
	var reps []replacement
	pos := 0
	for n, h := range f.Hunks {
		fail := func(format string, args ...any) error {
			return fmt.Errorf("%s: hunk %d (patch line %d): %s", f.Path, n+1, h.Line, fmt.Sprintf(format, args...))
		}
		if h.Anchor != "" {
			at := seekLines(lines, []string{h.Anchor}, pos, false)
			if at < 0 {
				at = seekPrefix(lines, h.Anchor, pos)
			}
			if at < 0 {
				return "", fail("cannot find the line %q", h.Anchor)
			}
			// The old lines are looked for from the anchor on, not after
			// it: models often repeat the line to change as the anchor.
			pos = at
		}
		if len(h.Old) == 0 {
			at := len(lines) // pure addition: at the end, or right after the anchor
			if h.Anchor != "" && !h.AtEOF {
				at = pos + 1
			}
			reps = append(reps, replacement{at, 0, h.New})
			pos = at
			continue
		}
		oldLines, newLines := h.Old, h.New
		at := seekLines(lines, oldLines, pos, h.AtEOF)
		if at < 0 && oldLines[len(oldLines)-1] == "" {
			// A trailing empty line is often an artefact of the patch's
			// layout rather than part of the file.
			oldLines = oldLines[:len(oldLines)-1]
			if len(newLines) > 0 && newLines[len(newLines)-1] == "" {
				newLines = newLines[:len(newLines)-1]
			}
			at = seekLines(lines, oldLines, pos, h.AtEOF)
		}
		if at < 0 {
			where := ""
			if h.AtEOF {
				where = " at the end of the file"
			}
			return "", fail("cannot find these lines%s:\n%s", where, indent(h.Old))
		}
		reps = append(reps, replacement{at, len(oldLines), newLines})
		pos = at + len(oldLines)
	}
	for i := len(reps) - 1; i >= 0; i-- {
		r := reps[i]
		lines = append(lines[:r.at], append(append([]string(nil), r.new...), lines[r.at+r.n:]...)...)
	}
	if len(lines) == 0 {
		return "", nil
	}
	return strings.Join(lines, "\n") + "\n", nil
}

// seekLines finds pattern in lines at or after start, preferring an exact
// match, then one ignoring trailing blanks, then one ignoring surrounding
// blanks. With atEOF the match must end the file.
func seekLines(lines, pattern []string, start int, atEOF bool) int {
	if len(pattern) > len(lines) {
		return -1
	}
	from, to := start, len(lines)-len(pattern)
	if atEOF {
		from = max(start, to)
	}
	for _, norm := range []func(string) string{
		func(s string) string { return s },
		func(s string) string { return strings.TrimRight(s, " \t") },
		strings.TrimSpace,
	} {
	next:
		for i := from; i <= to; i++ {
			for j, p := range pattern {
				if norm(lines[i+j]) != norm(p) {
					continue next
				}
			}
			return i
		}
	}
	return -1
}

// seekPrefix finds the first line at or after start that begins with
// anchor, ignoring surrounding blanks: models often write only the start of
// the line they mean ("@@ func main").
func seekPrefix(lines []string, anchor string, start int) int {
	anchor = strings.TrimSpace(anchor)
	for i := start; i < len(lines); i++ {
		if strings.HasPrefix(strings.TrimSpace(lines[i]), anchor) {
			return i
		}
	}
	return -1
}

func indent(lines []string) string {
	var b strings.Builder
	for i, l := range lines {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString("    " + l)
	}
	return b.String()
}

// ApplyPatchCommand recognises a shell command line that runs apply_patch
// on a patch, the way Codex-trained models call it through a shell tool,
// and returns the patch:
//
//	apply_patch <<'EOF'
//	*** Begin Patch
//	...
//	*** End Patch
//	EOF
//
// The here-document's delimiter may be quoted ('EOF', "EOF") or not, and
// "<<-" is accepted; the patch may also be apply_patch's one argument
// (apply_patch '*** Begin Patch ...'). Nothing may come before apply_patch
// or after the here-document. ok is false for any other command.
func ApplyPatchCommand(line string) (patch string, ok bool) {
	s := strings.TrimSpace(line)
	rest, found := strings.CutPrefix(s, "apply_patch")
	if !found || rest == "" || !strings.ContainsAny(rest[:1], " \t<") {
		return "", false
	}
	if r := strings.TrimLeft(rest, " \t"); strings.HasPrefix(r, "<<") && !strings.HasPrefix(r, "<<<") {
		head, body, found := strings.Cut(r[2:], "\n")
		if !found {
			return "", false
		}
		delim := strings.TrimSpace(strings.TrimPrefix(head, "-"))
		if n := len(delim); n >= 2 && (delim[0] == '\'' || delim[0] == '"') && delim[n-1] == delim[0] {
			delim = delim[1 : n-1]
		}
		if delim == "" || strings.ContainsAny(delim, " \t'\"") {
			return "", false
		}
		lines := strings.Split(body, "\n")
		last := len(lines) - 1
		for last > 0 && strings.TrimSpace(lines[last]) == "" {
			last--
		}
		if strings.TrimSpace(lines[last]) != delim {
			return "", false
		}
		return strings.Join(lines[:last], "\n"), true
	}
	words, err := SplitCommand(s)
	if err != nil || len(words) != 2 || words[0] != "apply_patch" {
		return "", false
	}
	return words[1], true
}

// ApplyPatchHeredoc is the shell command line that runs apply_patch on
// patch with a here-document whose delimiter the patch does not contain.
func ApplyPatchHeredoc(patch string) string {
	delim := "EOF"
	for strings.Contains(patch, delim) {
		delim += "_"
	}
	return "apply_patch <<'" + delim + "'\n" + strings.TrimRight(patch, "\n") + "\n" + delim
}
