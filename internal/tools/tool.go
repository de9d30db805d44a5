// Package tools defines the Tool interface the agent runtime calls, the
// registry of tools offered to a model, and the approval policy that decides
// which calls may run without asking a person. Built-in tools live in
// builtin/ and are confined to a working folder.
package tools

import (
	"context"
	"encoding/json"
)

// Spec describes a tool to the model and to protocols that list tools.
type Spec struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// Tool is something the model can call.
type Tool interface {
	Spec() Spec
	// Classify tells the approval policy what a call with args would do. It
	// must not have side effects.
	Classify(args json.RawMessage) Class
	// Run executes one call. out receives output as it is produced (it may
	// be called from several goroutines of the tool, never after Run returns).
	// Run returns the result the model sees; a failure the model should read
	// is a Result with IsError, while a returned error means the call could
	// not be attempted at all. Run must stop promptly when ctx is cancelled.
	Run(ctx context.Context, args json.RawMessage, out Output) (Result, error)
}

// Output receives a running tool's output; stream is "stdout" or "stderr"
// (or "" where the distinction means nothing).
type Output func(stream, text string)

// Result is what a tool call returns to the model.
type Result struct {
	Content string
	IsError bool
	// ExitCode is the exit status of a call that ran a program (bash):
	// its own status, 124 when it timed out, 128+N when signal N killed
	// it. nil for tools that run no program.
	ExitCode *int
	// TimedOut says the tool ran out of time (and IsError is set).
	TimedOut bool
}

// PatchEditor is implemented by tools whose calls carry a patch that a
// person may edit before approving it (apply_patch, and bash running
// apply_patch): WithPatch returns the call's arguments with patch in place
// of the model's.
type PatchEditor interface {
	WithPatch(args json.RawMessage, patch string) (json.RawMessage, error)
}

// Effect is what a call does to the world, for the approval policy.
type Effect int

// Effects, from harmless to most powerful.
const (
	// EffectRead only reads inside the working folder.
	EffectRead Effect = iota + 1
	// EffectEdit writes files inside the working folder.
	EffectEdit
	// EffectNetwork reaches the network (web_fetcher): what it fetches can
	// carry what the model read elsewhere out of the machine, so it is no
	// read.
	EffectNetwork
	// EffectCommand runs a program.
	EffectCommand
)

// Class is a call's classification.
type Class struct {
	Effect Effect
	// Command is the argv of a command call, for approval prompts.
	Command []string
	// Patch is the patch text of an apply_patch call.
	Patch string
	// Key is what approve-always remembers: the program name for commands,
	// the tool name for edits and network calls.
	Key string
	// ReadOnlyCommand is set for commands known to only read (ls, cat,
	// git status, ...): the default policy runs them without asking, in
	// the read-only sandbox. It only spares people a question; the
	// sandbox, not this flag, is what keeps such a command from writing.
	ReadOnlyCommand bool
	// Parts classifies each call of a call that makes several (batch). The
	// fields above then summarise them conservatively: Effect is the most
	// powerful part's, ReadOnlyCommand holds only when no part edits or runs
	// anything else, and Key is set only when every part that needs approval
	// shares it. Policy.Decide judges each part.
	Parts []Class
}
