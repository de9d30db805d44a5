package event

import "encoding/json"

// CommandKind names what a Command asks of the owner of a thread's runs.
type CommandKind string

// Command kinds.
const (
	// CommandPost gives the thread a user message: it starts a run, or
	// waits in the thread's queue while another run is active.
	CommandPost CommandKind = "post"
	// CommandCancel cancels the active run and drops the queued input.
	CommandCancel CommandKind = "cancel"
	// CommandApprove answers tool.approval.requested.
	CommandApprove CommandKind = "approve"
	// CommandInput answers input.requested.
	CommandInput CommandKind = "input"
	// CommandUI answers ui.requested.
	CommandUI CommandKind = "ui"
)

// Command is what people ask of a thread's runs, whatever protocol they
// speak: post a message, cancel, or answer a pending request. Commands are
// not events: they travel over the bus to the node that owns the thread's
// runs (bus.Send), which turns them into events. Command is plain data, so
// any bus can carry it as JSON.
type Command struct {
	Kind CommandKind `json:"kind"`
	// Run is the run the command is for; empty means the thread's active
	// run. For CommandPost it is the id the new run will have.
	Run string `json:"run,omitempty"`
	// ID is the call id (approvals) or request id (input, UI) answered;
	// for CommandPost the id of the user's message.
	ID string `json:"id,omitempty"`
	// Decision is an approval's answer.
	Decision Decision `json:"decision,omitempty"`
	// Text is the posted message, the input answer, or the message to the
	// model that comes with a denial.
	Text string `json:"text,omitempty"`
	// Data is a UI component's answer.
	Data json.RawMessage `json:"data,omitempty"`
	// Patch, with an approving decision on a patch call, is the patch as
	// the person edited it: it is applied instead of the model's.
	Patch string `json:"patch,omitempty"`
	// Interactive marks a posted message whose run may ask people for
	// approvals and input (see agent.Spec.Interactive).
	Interactive bool `json:"interactive,omitempty"`
	// Options are how a posted message's run is to be run.
	Options *RunOptions `json:"options,omitempty"`
	// Key is the client's idempotency key of an answer: the same key
	// again, from a client that retries after a reconnect, answers
	// nothing a second time (runs.Manager.Resolve).
	Key string `json:"key,omitempty"`
}

// RunOptions are what a protocol may choose about a run it starts. They
// are plain data, so they travel with the post to whichever node runs it;
// that node turns them into the run's prompt, tools and model.
type RunOptions struct {
	// Strategy is how the run reasons: react (the default), or another of
	// agent.Strategies.
	Strategy string `json:"strategy,omitempty"`
	// Folder is the run's working folder, relative to the server's working
	// folder ("" is the working folder itself). The run's tools are
	// confined to it and its role prompt is read from it.
	Folder string `json:"folder,omitempty"`
	// Workflow names a multi-agent workflow.
	Workflow string `json:"workflow,omitempty"`
	// Verbose logs the run at debug level.
	Verbose bool `json:"verbose,omitempty"`
	// Compact makes the run compact the thread's context (summarise its
	// older history for the model) instead of answering: the post carries
	// no user message and records none.
	Compact bool `json:"compact,omitempty"`
	// Traceparent is the W3C trace context of the request that posted the
	// run (internal/tracing), so that the run's spans join its trace on
	// whichever node runs it; set by the run manager, not by protocols.
	Traceparent string `json:"traceparent,omitempty"`
	// Key is the client's idempotency key of the post (runs.Input.Key),
	// kept with it while it waits in a queue.
	Key string `json:"key,omitempty"`
}

// Answers reports whether the command answers a pending request (an
// approval, input or UI request) rather than posting or cancelling.
func (c Command) Answers() bool {
	switch c.Kind {
	case CommandApprove, CommandInput, CommandUI:
		return true
	}
	return false
}
