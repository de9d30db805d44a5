package tools

import (
	"context"

	"github.com/agentwire/agentwire/internal/tools/sandbox"
)

// Level is the sandbox level a call's subprocesses run at
// (sandbox.Level). The approval decision chooses it: the agent puts it in
// the context of every call it runs (WithLevel), and a tool that starts a
// program takes it out (LevelFrom).
type Level = sandbox.Level

// Levels, as the sandbox names them.
const (
	LevelReadOnly       = sandbox.ReadOnly
	LevelWorkspaceWrite = sandbox.WorkspaceWrite
	LevelFullAccess     = sandbox.FullAccess
)

type levelKey struct{}

// WithLevel returns ctx carrying the sandbox level of the call about to run.
func WithLevel(ctx context.Context, l Level) context.Context {
	return context.WithValue(ctx, levelKey{}, l)
}

// LevelFrom returns the level in ctx, or LevelReadOnly when there is none:
// a call nobody judged runs at the most confined level.
func LevelFrom(ctx context.Context) Level {
	if l, ok := ctx.Value(levelKey{}).(Level); ok {
		return l
	}
	return LevelReadOnly
}
