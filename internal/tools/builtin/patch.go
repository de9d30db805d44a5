package builtin

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/agentwire/agentwire/internal/tools"
	"github.com/agentwire/agentwire/internal/tools/sandbox"
)

type applyPatchArgs struct {
	Patch string `json:"patch"`
}

func applyPatchTool(root *sandbox.Root) tools.Tool {
	return &tool[applyPatchArgs]{
		name: "apply_patch",
		desc: "Apply a patch in the Codex envelope to files of the working folder, all or nothing:\n" +
			"*** Begin Patch\n*** Add File: path\n+line\n*** Delete File: path\n*** Update File: path\n*** Move to: new/path (optional)\n" +
			"@@ a line before the change, e.g. the enclosing function (optional)\n context line\n-removed line\n+added line\n*** End of File (when the change ends the file)\n*** End Patch",
		schema: `{"type":"object","properties":{"patch":{"type":"string","description":"The whole patch, from *** Begin Patch to *** End Patch"}},"required":["patch"],"additionalProperties":false}`,
		max:    tools.EffectEdit,
		classify: func(a applyPatchArgs) tools.Class {
			return patchClass(a.Patch)
		},
		run: func(ctx context.Context, a applyPatchArgs, _ tools.Output) (tools.Result, error) {
			return applyPatch(ctx, root, a.Patch)
		},
		withPatch: func(a applyPatchArgs, patch string) applyPatchArgs {
			a.Patch = patch
			return a
		},
	}
}

// patchClass is the class of applying patch, however it is called: an
// edit that approve-always remembers as "apply_patch".
func patchClass(patch string) tools.Class {
	return tools.Class{Effect: tools.EffectEdit, Key: "apply_patch", Patch: patch}
}

// applyPatch applies a patch in the Codex envelope inside root, all or
// nothing: every section is worked out in memory first, and a write that
// fails puts back the files already written.
func applyPatch(ctx context.Context, root *sandbox.Root, text string) (tools.Result, error) {
	p, err := tools.ParsePatch(text)
	if err != nil {
		return failf("%v (no changes were made)", err), nil
	}
	plan := &patchPlan{root: root, files: map[string]*planned{}}
	summary, err := plan.build(p)
	if err != nil {
		return failf("%v (no changes were made)", err), nil
	}
	if err := ctx.Err(); err != nil {
		return tools.Result{}, err
	}
	if err := plan.commit(); err != nil {
		return failf("%v", err), nil
	}
	return ok("Success. Updated the following files:\n%s", strings.Join(summary, "\n")), nil
}

// planned is one file's state as a patch is worked out in memory.
type planned struct {
	rel        string // resolved, relative to the working folder
	shown      string // as the patch names it
	orig       []byte
	origExists bool
	content    []byte
	exists     bool
	touched    bool
}

// patchPlan applies a patch to an in-memory copy of the files it names, so
// that nothing is written unless every section applies.
type patchPlan struct {
	root  *sandbox.Root
	files map[string]*planned
	order []*planned
}

func (pl *patchPlan) load(p string) (*planned, error) {
	rel, err := pl.root.Resolve(p)
	if err != nil {
		return nil, err
	}
	if rel == "." {
		return nil, fmt.Errorf("%s: is the working folder", p)
	}
	if f, ok := pl.files[rel]; ok {
		return f, nil
	}
	f := &planned{rel: rel, shown: p}
	fi, err := pl.root.Stat(rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, err
	case fi.IsDir():
		return nil, fmt.Errorf("%s: is a directory", p)
	default:
		if f.orig, err = pl.root.ReadFile(rel); err != nil {
			return nil, err
		}
		f.origExists = true
	}
	f.content, f.exists = f.orig, f.origExists
	pl.files[rel] = f
	return f, nil
}

func (pl *patchPlan) touch(f *planned) {
	if !f.touched {
		f.touched = true
		pl.order = append(pl.order, f)
	}
}

// build works every section out in memory and returns the summary lines.
func (pl *patchPlan) build(p *tools.Patch) ([]string, error) {
	var summary []string
	for _, fp := range p.Files {
		f, err := pl.load(fp.Path)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", fp.Op, fp.Path, err)
		}
		switch fp.Op {
		case tools.PatchAdd:
			f.content, f.exists = []byte(fp.Content), true
			summary = append(summary, "A "+fp.Path)
		case tools.PatchDelete:
			if !f.exists {
				return nil, fmt.Errorf("delete %s: no such file", fp.Path)
			}
			f.content, f.exists = nil, false
			summary = append(summary, "D "+fp.Path)
		case tools.PatchUpdate:
			if !f.exists {
				return nil, fmt.Errorf("update %s: no such file", fp.Path)
			}
			updated, err := fp.Apply(string(f.content))
			if err != nil {
				return nil, fmt.Errorf("update %w", err)
			}
			if fp.MoveTo == "" {
				f.content = []byte(updated)
				summary = append(summary, "M "+fp.Path)
				break
			}
			dst, err := pl.load(fp.MoveTo)
			if err != nil {
				return nil, fmt.Errorf("move %s to %s: %w", fp.Path, fp.MoveTo, err)
			}
			if dst != f && dst.exists {
				return nil, fmt.Errorf("move %s to %s: the destination exists", fp.Path, fp.MoveTo)
			}
			f.content, f.exists = nil, false
			pl.touch(f)
			f = dst
			f.content, f.exists = []byte(updated), true
			summary = append(summary, "M "+fp.Path+" -> "+fp.MoveTo)
		}
		pl.touch(f)
	}
	return summary, nil
}

// commit writes the planned files, then removes the deleted ones. If a
// write fails, the files already changed are put back as they were.
func (pl *patchPlan) commit() error {
	var done []*planned
	undo := func(cause error) error {
		for _, f := range done {
			if f.origExists {
				pl.root.WriteFile(f.rel, f.orig)
			} else {
				pl.root.Remove(f.rel)
			}
		}
		return fmt.Errorf("%w (the changes already made were undone)", cause)
	}
	for _, removing := range []bool{false, true} {
		for _, f := range pl.order {
			switch {
			case !removing && f.exists:
				if err := pl.root.WriteFile(f.rel, f.content); err != nil {
					return undo(fmt.Errorf("write %s: %w", f.shown, err))
				}
			case removing && !f.exists && f.origExists:
				if err := pl.root.Remove(f.rel); err != nil {
					return undo(fmt.Errorf("delete %s: %w", f.shown, err))
				}
			default:
				continue
			}
			done = append(done, f)
		}
	}
	return nil
}
