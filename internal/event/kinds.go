package event

// Role is who a message is from.
type Role string

// Roles of messages.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleSystem    Role = "system"
)

// Decision is a person's answer to a tool approval request.
type Decision string

// Approval decisions.
const (
	// DecisionApprove runs this call.
	DecisionApprove Decision = "approve"
	// DecisionApproveAlways runs this call and, for the rest of the thread,
	// every later call with the same approval key (command name or tool).
	DecisionApproveAlways Decision = "approve_always"
	// DecisionDenyContinue refuses the call; the model is told and goes on.
	DecisionDenyContinue Decision = "deny_continue"
	// DecisionDenyStop refuses the call and ends the run.
	DecisionDenyStop Decision = "deny_stop"
	// DecisionExplain asks the model to explain the call; the same request
	// then stands again.
	DecisionExplain Decision = "explain"
)

// Failure codes of run.failed.
const (
	CodeModelError = "model_error"
	CodeStepLimit  = "step_limit"
	CodeToolError  = "tool_error"
	CodeInternal   = "internal"
	// CodeInterrupted ends a run that a previous server process left
	// unfinished.
	CodeInterrupted = "interrupted"
	// CodeDenied is the reason of a run.cancelled that a person stopped by
	// denying a tool call (deny_stop).
	CodeDenied = "denied"
)

// PurposeExplanation marks a message that explains a pending tool call.
const PurposeExplanation = "explanation"
