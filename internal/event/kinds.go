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
	// CodeStoreError ends a run whose events could not be stored.
	CodeStoreError = "store_error"
	// CodeInterrupted ends a run that a previous server process left
	// unfinished.
	CodeInterrupted = "interrupted"
	// CodeDenied is the reason of a run.cancelled that a person stopped by
	// denying a tool call (deny_stop).
	CodeDenied = "denied"
	// CodeBudgetExceeded ends a run refused a model call because its
	// principal used up a budget (a budget.exceeded event precedes it).
	CodeBudgetExceeded = "budget_exceeded"
)

// PurposeExplanation marks a message that explains a pending tool call.
const PurposeExplanation = "explanation"

// PurposeStrategy marks a message and the usage of a model call that a
// reasoning strategy made for itself (dup's understanding and plan, tot's
// candidates and scores, got's plan): shown to people, left out of the
// model's later history, like an explanation.
const PurposeStrategy = "strategy"

// PurposeSummary marks the usage of a model call that summarised the
// conversation for a compaction.
const PurposeSummary = "summary"

// PurposeSelection marks the usage of a model call that chose a group
// chat's next speaker (speaker_selection auto).
const PurposeSelection = "selection"

// Reasons of run.completed. A react run ends with ReasonFinalAnswer; a
// group run (a workflow) with ReasonCompleted, ReasonMaxRounds or
// ReasonTerminated.
const (
	// ReasonFinalAnswer: the model answered without calling a tool.
	ReasonFinalAnswer = "final_answer"
	// ReasonCompleted: the group chat handed the conversation back to the
	// user (its last agent spoke, or the selection said done).
	ReasonCompleted = "completed"
	// ReasonMaxRounds: the group chat used all of its max_rounds turns.
	ReasonMaxRounds = "max_rounds"
	// ReasonTerminated: an agent said the workflow's termination keyword.
	ReasonTerminated = "terminated"
)

// Ways a group chat's speaker was selected (AgentSelected.Selection).
const (
	SelectionRoundRobin = "round_robin"
	SelectionAuto       = "auto"
	SelectionManual     = "manual"
	// SelectionFallback: auto or manual selection gave no usable answer
	// (or timed out), so the next agent in list order speaks.
	SelectionFallback = "fallback"
	// SelectionOnly: the workflow has one agent.
	SelectionOnly = "only"
)

// StrategyCompact is the strategy of run.started for a run that only
// compacts the thread's context (RunOptions.Compact).
const StrategyCompact = "compact"
