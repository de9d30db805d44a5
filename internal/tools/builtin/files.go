package builtin

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"

	"github.com/agentwire/agentwire/internal/tools"
	"github.com/agentwire/agentwire/internal/tools/sandbox"
)

// Limits of the file tools.
const (
	readDefaultLines = 2000
	readMaxBytes     = 128 << 10
	lsMaxEntries     = 1000
	sniffLen         = 8000 // bytes looked at to tell binary files
)

// fsFail turns a file-system error about p into a result the model can act on.
func fsFail(p string, err error) tools.Result {
	var pe *fs.PathError
	switch {
	case errors.Is(err, sandbox.ErrEscape), errors.Is(err, sandbox.ErrProtected):
		return failf("refused: %v", err)
	case errors.Is(err, fs.ErrNotExist):
		return failf("%s: no such file or directory", p)
	case errors.As(err, &pe):
		return failf("%s: %v", p, pe.Err)
	}
	return failf("%s: %v", p, err)
}

func binary(head []byte) bool { return bytes.IndexByte(head, 0) >= 0 }

type readArgs struct {
	Path   string `json:"path"`
	Offset int    `json:"offset"`
	Limit  int    `json:"limit"`
}

func readTool(root *sandbox.Root) tools.Tool {
	return &tool[readArgs]{
		name: "read",
		desc: "Read a text file in the working folder. Returns its lines as they are; offset (1-based line) and limit (lines, default 2000) read part of a long file.",
		schema: `{"type":"object","properties":{` +
			`"path":{"type":"string","description":"File path, relative to the working folder"},` +
			`"offset":{"type":"integer","minimum":1,"description":"First line to read (1-based)"},` +
			`"limit":{"type":"integer","minimum":1,"description":"Number of lines to read (default 2000)"}},` +
			`"required":["path"],"additionalProperties":false}`,
		max: tools.EffectRead,
		run: func(ctx context.Context, a readArgs, _ tools.Output) (tools.Result, error) {
			if a.Path == "" {
				return failf("path is required"), nil
			}
			fi, err := root.Stat(a.Path)
			if err != nil {
				return fsFail(a.Path, err), nil
			}
			if fi.IsDir() {
				return failf("%s is a directory; use ls to list it", a.Path), nil
			}
			f, err := root.Open(a.Path)
			if err != nil {
				return fsFail(a.Path, err), nil
			}
			defer f.Close()
			return readLines(ctx, a, fi.Size(), bufio.NewReaderSize(f, 64<<10))
		},
	}
}

func readLines(ctx context.Context, a readArgs, size int64, br *bufio.Reader) (tools.Result, error) {
	if head, _ := br.Peek(sniffLen); binary(head) {
		return ok("%s is a binary file (%d bytes); not shown", a.Path, size), nil
	}
	start, limit := max(a.Offset, 1), a.Limit
	if limit <= 0 {
		limit = readDefaultLines
	}
	var b strings.Builder
	line, shown, more := 0, 0, false
	for {
		text, err := br.ReadString('\n')
		if text == "" && err != nil {
			if err != io.EOF {
				return fsFail(a.Path, err), nil
			}
			break
		}
		line++
		if line%4096 == 0 && ctx.Err() != nil {
			return tools.Result{}, ctx.Err()
		}
		if line < start {
			continue
		}
		if shown == limit || b.Len()+len(text) > readMaxBytes {
			if shown == 0 { // one huge line: show its start
				b.WriteString(text[:readMaxBytes])
				shown = 1
			}
			more = true
			break
		}
		b.WriteString(text)
		shown++
	}
	switch {
	case line == 0:
		return ok("(%s is empty)", a.Path), nil
	case line < start:
		return failf("offset %d is past the end of %s (%d lines)", start, a.Path, line), nil
	}
	if more {
		if s := b.String(); !strings.HasSuffix(s, "\n") {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "[lines %d-%d shown; more follow: call read with offset=%d to continue]", start, start+shown-1, start+shown)
	}
	return ok("%s", b.String()), nil
}

type writeFileArgs struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

func writeFileTool(root *sandbox.Root) tools.Tool {
	return &tool[writeFileArgs]{
		name: "write_file",
		desc: "Create or replace a file in the working folder with the given content. Missing parent folders are created.",
		schema: `{"type":"object","properties":{` +
			`"path":{"type":"string","description":"File path, relative to the working folder"},` +
			`"content":{"type":"string","description":"The file's entire new content"}},` +
			`"required":["path","content"],"additionalProperties":false}`,
		max: tools.EffectEdit,
		run: func(_ context.Context, a writeFileArgs, _ tools.Output) (tools.Result, error) {
			if a.Path == "" {
				return failf("path is required"), nil
			}
			verb := "Created"
			if _, err := root.Stat(a.Path); err == nil {
				verb = "Replaced"
			}
			if err := root.WriteFile(a.Path, []byte(a.Content)); err != nil {
				return fsFail(a.Path, err), nil
			}
			return ok("%s %s (%d bytes)", verb, a.Path, len(a.Content)), nil
		},
	}
}

// replaceIn replaces old with new in s: exactly one occurrence, or every
// one with all.
func replaceIn(s, old, new string, all bool) (string, int, error) {
	switch n := strings.Count(s, old); {
	case old == "":
		return "", 0, errors.New("old_string is empty")
	case old == new:
		return "", 0, errors.New("old_string and new_string are the same")
	case n == 0:
		return "", 0, errors.New("old_string was not found (it must match exactly, including whitespace)")
	case n > 1 && !all:
		return "", 0, fmt.Errorf("old_string occurs %d times; include more surrounding text to make it unique, or set replace_all", n)
	default:
		if all {
			return strings.ReplaceAll(s, old, new), n, nil
		}
		return strings.Replace(s, old, new, 1), 1, nil
	}
}

type editArgs struct {
	Path       string `json:"path"`
	OldString  string `json:"old_string"`
	NewString  string `json:"new_string"`
	ReplaceAll bool   `json:"replace_all"`
}

const editProps = `"old_string":{"type":"string","description":"Exact text to replace; it must occur once unless replace_all is set"},` +
	`"new_string":{"type":"string","description":"Text to put in its place"},` +
	`"replace_all":{"type":"boolean","description":"Replace every occurrence"}`

func editTool(root *sandbox.Root) tools.Tool {
	return &tool[editArgs]{
		name: "edit",
		desc: "Replace an exact piece of text in a file of the working folder.",
		schema: `{"type":"object","properties":{` +
			`"path":{"type":"string","description":"File path, relative to the working folder"},` + editProps + `},` +
			`"required":["path","old_string","new_string"],"additionalProperties":false}`,
		max: tools.EffectEdit,
		run: func(_ context.Context, a editArgs, _ tools.Output) (tools.Result, error) {
			data, err := root.ReadFile(a.Path)
			if err != nil {
				return fsFail(a.Path, err), nil
			}
			s, n, err := replaceIn(string(data), a.OldString, a.NewString, a.ReplaceAll)
			if err != nil {
				return failf("%s: %v", a.Path, err), nil
			}
			if err := root.WriteFile(a.Path, []byte(s)); err != nil {
				return fsFail(a.Path, err), nil
			}
			return ok("Edited %s: %d replacement(s)", a.Path, n), nil
		},
	}
}

type multiEditArgs struct {
	Path  string `json:"path"`
	Edits []struct {
		OldString  string `json:"old_string"`
		NewString  string `json:"new_string"`
		ReplaceAll bool   `json:"replace_all"`
	} `json:"edits"`
}

func multiEditTool(root *sandbox.Root) tools.Tool {
	return &tool[multiEditArgs]{
		name: "multiedit",
		desc: "Make several replacements in one file, in order, all or none: if any edit fails, the file is left as it was.",
		schema: `{"type":"object","properties":{` +
			`"path":{"type":"string","description":"File path, relative to the working folder"},` +
			`"edits":{"type":"array","minItems":1,"items":{"type":"object","properties":{` + editProps + `},` +
			`"required":["old_string","new_string"],"additionalProperties":false}}},` +
			`"required":["path","edits"],"additionalProperties":false}`,
		max: tools.EffectEdit,
		run: func(_ context.Context, a multiEditArgs, _ tools.Output) (tools.Result, error) {
			if len(a.Edits) == 0 {
				return failf("edits is empty"), nil
			}
			data, err := root.ReadFile(a.Path)
			if err != nil {
				return fsFail(a.Path, err), nil
			}
			s, total := string(data), 0
			for i, e := range a.Edits {
				var n int
				if s, n, err = replaceIn(s, e.OldString, e.NewString, e.ReplaceAll); err != nil {
					return failf("%s: edit %d: %v (no edit was made)", a.Path, i+1, err), nil
				}
				total += n
			}
			if err := root.WriteFile(a.Path, []byte(s)); err != nil {
				return fsFail(a.Path, err), nil
			}
			return ok("Edited %s: %d edits, %d replacement(s)", a.Path, len(a.Edits), total), nil
		},
	}
}

type moveFileArgs struct {
	Source      string `json:"source"`
	Destination string `json:"destination"`
}

func moveFileTool(root *sandbox.Root) tools.Tool {
	return &tool[moveFileArgs]{
		name: "move_file",
		desc: "Move or rename a file or folder within the working folder. The destination must not exist.",
		schema: `{"type":"object","properties":{` +
			`"source":{"type":"string"},"destination":{"type":"string"}},` +
			`"required":["source","destination"],"additionalProperties":false}`,
		max: tools.EffectEdit,
		run: func(_ context.Context, a moveFileArgs, _ tools.Output) (tools.Result, error) {
			if _, err := root.Lstat(a.Source); err != nil {
				return fsFail(a.Source, err), nil
			}
			if _, err := root.Lstat(a.Destination); err == nil {
				return failf("%s already exists", a.Destination), nil
			} else if !errors.Is(err, fs.ErrNotExist) {
				return fsFail(a.Destination, err), nil
			}
			if err := root.Rename(a.Source, a.Destination); err != nil {
				return fsFail(a.Source, err), nil
			}
			return ok("Moved %s to %s", a.Source, a.Destination), nil
		},
	}
}

type pathArgs struct {
	Path string `json:"path"`
}

const pathSchema = `{"type":"object","properties":{"path":{"type":"string","description":"Path, relative to the working folder"}},"required":["path"],"additionalProperties":false}`

func deleteFileTool(root *sandbox.Root) tools.Tool {
	return &tool[pathArgs]{
		name:   "delete_file",
		desc:   "Delete a file (or an empty folder) in the working folder. A symbolic link is deleted itself, not what it points to.",
		schema: pathSchema,
		max:    tools.EffectEdit,
		run: func(_ context.Context, a pathArgs, _ tools.Output) (tools.Result, error) {
			if rel, err := root.Resolve(a.Path); err == nil && rel == "." {
				return failf("refused: that is the working folder itself"), nil
			}
			if err := root.Remove(a.Path); err != nil {
				return fsFail(a.Path, err), nil
			}
			return ok("Deleted %s", a.Path), nil
		},
	}
}

func createDirTool(root *sandbox.Root) tools.Tool {
	return &tool[pathArgs]{
		name:   "create_dir",
		desc:   "Create a folder (and any missing parents) in the working folder.",
		schema: pathSchema,
		max:    tools.EffectEdit,
		run: func(_ context.Context, a pathArgs, _ tools.Output) (tools.Result, error) {
			if a.Path == "" {
				return failf("path is required"), nil
			}
			if err := root.MkdirAll(a.Path); err != nil {
				return fsFail(a.Path, err), nil
			}
			return ok("Created folder %s", a.Path), nil
		},
	}
}

func lsTool(root *sandbox.Root) tools.Tool {
	return &tool[pathArgs]{
		name:   "ls",
		desc:   "List a folder of the working folder (default: the working folder itself). Folders end with '/'.",
		schema: `{"type":"object","properties":{"path":{"type":"string","description":"Folder path, relative to the working folder (default \".\")"}},"additionalProperties":false}`,
		max:    tools.EffectRead,
		run: func(ctx context.Context, a pathArgs, _ tools.Output) (tools.Result, error) {
			p := a.Path
			if p == "" {
				p = "."
			}
			fi, err := root.Stat(p)
			if err != nil {
				return fsFail(p, err), nil
			}
			if !fi.IsDir() {
				return ok("%s (%d bytes)", p, fi.Size()), nil
			}
			entries, err := root.ReadDir(p)
			if err != nil {
				return fsFail(p, err), nil
			}
			if len(entries) == 0 {
				return ok("(%s is empty)", p), nil
			}
			var b strings.Builder
			for i, e := range entries {
				if i == lsMaxEntries {
					fmt.Fprintf(&b, "[%d more entries not shown]\n", len(entries)-i)
					break
				}
				name := e.Name()
				if e.IsDir() {
					name += "/"
				} else if e.Type()&fs.ModeSymlink != 0 {
					if fi, err := root.Stat(path.Join(p, e.Name())); err == nil && fi.IsDir() {
						name += "/"
					}
				}
				b.WriteString(name)
				b.WriteByte('\n')
			}
			return ok("%s", strings.TrimSuffix(b.String(), "\n")), nil
		},
	}
}
