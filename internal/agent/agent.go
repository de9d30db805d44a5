// Package agent runs agents: the ReAct loop that calls the model with the
// thread's history and the tools on offer, streams its output as canonical
// events, runs the tools it calls (asking a person first where the approval
// policy says so) and feeds the results back until the model answers or the
// step limit is reached.
//
// The agent knows no wire protocol and no store: it writes events to a
// Journal and receives people's answers (approvals, input) as Commands.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/llm"
	"github.com/agentwire/agentwire/internal/metrics"
	"github.com/agentwire/agentwire/internal/tools"
	"github.com/agentwire/agentwire/internal/workflow"
)

// Journal is a thread's log as a run sees it.
type Journal interface {
	// Append commits events to the thread (and publishes them).
	Append(ctx context.Context, events ...event.Event) ([]event.Event, error)
	// History returns the thread's conversation events (store.Log.History).
	History(ctx context.Context) ([]event.Event, error)

	// Preview sends e, an uncommitted delta marked with Event.Preview, to
	// the thread's live subscribers ahead of its commit
	// (thread.Service.Preview).
	Preview(e event.Event)
	// Previews reports whether a preview reaches anyone: a journal that
	// sends none says false, and the run commits deltas as they come.
	Previews() bool
	// WaitsForCommits reports whether one of the thread's live
	// subscribers takes no previews, and so sees deltas only once they
	// are committed.
	WaitsForCommits() bool
}

// Toolbox is the set of tools a run may offer the model.
type Toolbox interface {
	Get(name string) (tools.Tool, bool)
	Specs() []tools.Spec
}

// Policy is the approval policy (tools.Policy, or tools.Judge with the
// sandbox in force): it judges a classified call, given the thread's
// approve-always memory, and chooses the sandbox level of a call about to
// run (approved says a person approved it).
type Policy interface {
	Decide(c tools.Class, remembered func(key string) bool) tools.Verdict
	Level(c tools.Class, approved bool, remembered func(key string) bool) tools.Level
}

// Config configures an Agent.
type Config struct {
	Model llm.Model
	Tools Toolbox
	// Policy is the approval policy; nil runs every call (full-auto).
	Policy Policy
	// MaxSteps caps the model calls of one run (default 10): react's
	// turns, dup's act phase, each of tot's steps' calls and each got
	// sub-task. Spec.MaxSteps overrides it for one run.
	MaxSteps int
	// TotBranches is how many candidate thoughts tot proposes per step
	// (default 3); TotDepth how deep its tree goes (default 5).
	TotBranches int
	TotDepth    int
	// GraphParallel caps how many got nodes run at once (default 4).
	GraphParallel int
	// System is the system prompt.
	System string
	// Name is the agent's name in events (default "assistant").
	Name string
	// InputTimeout bounds the wait for a person's answer to an input or
	// UI request that sets no timeout of its own (0: no limit). When it
	// passes the run writes input.timed_out and the tool gets a timeout.
	InputTimeout time.Duration
	// MaxResultBytes caps a tool result as the model and the log see it
	// (default 64 KiB).
	MaxResultBytes int
	// ContextWindow is the model's context window in tokens; 0 takes it
	// from the table of known models (llm.ContextWindow).
	ContextWindow int
	// CompactThreshold is the share of the context window (0..1) past
	// which a run compacts the conversation before calling the model (see
	// context.go); 0 never compacts automatically.
	CompactThreshold float64
	// CoalesceDeltas merges the consecutive deltas of one message (or
	// reasoning block, or tool call) that gather while the run's previous
	// append is being committed into one event (see coalesce). Off, every
	// chunk the model streams is an event of its own, which keeps a
	// scripted scenario's frames the same from run to run.
	CoalesceDeltas bool
	// LiveDeltas, when positive, sends each streamed delta to the thread's
	// live subscribers at once, ahead of its commit, when the journal can
	// (Journal.Previews), and lets the deltas of a stream gather for up to this
	// long before they are committed as one event (see emitter). Zero
	// delivers every event only once committed.
	LiveDeltas time.Duration
	// LiveDeltasUnwatched, when longer than LiveDeltas, is how long the
	// deltas may gather instead while none of the thread's live
	// subscribers waits for commits (Journal.WaitsForCommits): each has
	// seen them already, so their commit only keeps them, and fewer,
	// larger commits write less.
	LiveDeltasUnwatched time.Duration
	Logger              *slog.Logger
	// Metrics counts runs, tool calls and the requests that wait for
	// people; nil counts nothing. (Model calls are counted around the
	// model: see internal/server.)
	Metrics *metrics.Metrics
	// Budget, when set, is asked before each model call of a run whether
	// the thread's principal has budget left (budget.go), and prices each
	// call's usage event; nil limits nothing and prices nothing.
	Budget Budget
}

// Agent runs the ReAct loop. It is safe for concurrent runs.
type Agent struct {
	cfg Config
}

// New returns an Agent.
func New(cfg Config) *Agent {
	if cfg.MaxSteps <= 0 {
		cfg.MaxSteps = 10
	}
	if cfg.TotBranches <= 0 {
		cfg.TotBranches = 3
	}
	if cfg.TotDepth <= 0 {
		cfg.TotDepth = 5
	}
	if cfg.GraphParallel <= 0 {
		cfg.GraphParallel = 4
	}
	if cfg.Name == "" {
		cfg.Name = "assistant"
	}
	if cfg.MaxResultBytes <= 0 {
		cfg.MaxResultBytes = 64 << 10
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Policy == nil {
		cfg.Policy = tools.PolicyFullAuto
	}
	return &Agent{cfg: cfg}
}

// Spec identifies one run.
type Spec struct {
	Thread string
	Run    string
	// Input is the user text that started the run (for run.started).
	Input string
	// Interactive says a person can answer approvals and input requests for
	// this run. Runs started over protocols that cannot carry them
	// (agentchat, threads) are not: a call that would need approval is not
	// run, and the user is told why in a system message.
	Interactive bool
	// Strategy names how the run reasons (see Strategies); "" is "react".
	Strategy string
	// MaxSteps, when positive, replaces Config.MaxSteps for this run.
	MaxSteps int
	// System, Tools and Model replace the agent's own for this run when
	// set: a protocol may give a run its own role prompt, working folder
	// or model.
	System string
	Tools  Toolbox
	Model  llm.Model
	// Logger, when set, logs this run instead of the agent's logger (a
	// protocol's "verbose" run logs at debug level).
	Logger *slog.Logger
	// After, when known, is the seq of the thread's last event before the
	// run (its user message): the run's first events may be previewed
	// after it (Config.LiveDeltas) before any of them is committed.
	After int64
	// Compact makes the run only compact the thread's context (a manual
	// compaction): it writes run.started with strategy
	// event.StrategyCompact, context.compacted, and its end.
	Compact bool
	// Workflow is the group chat a "group" run plays (group.go).
	Workflow *workflow.Workflow
	// Models are the models of the workflow's agents that name one, by
	// model name; an agent whose model is missing here fails the run.
	Models map[string]llm.Model
}

// A Strategy runs a run from its first model call to its end: it calls
// the model (r.think, r.stream), runs the tools it asks for (r.act) and
// writes exactly one of run.completed, run.failed or run.cancelled (r.end
// for failures). The run's transcript is in r.msgs when it starts.
type Strategy func(ctx context.Context, r *run)

// Strategies are the ways a run can reason, by the names Spec.Strategy
// takes. A new strategy is its file and one line here.
var strategies = map[string]Strategy{
	"react":        react,
	"group":        group,
	"dup":          dup,
	"tot":          tot,
	"got":          got,
	"got_adaptive": gotAdaptive,
}

// Strategies lists the strategy names a Spec may ask for, sorted.
func Strategies() []string { return slices.Sorted(maps.Keys(strategies)) }

// errStop ends a run early: a person denied a call and stopped the run.
var errStop = errors.New("stopped by a denial")

// Run executes one run to its end and writes every event of it, ending with
// exactly one of run.completed, run.failed or run.cancelled. The user's
// message must already be in the journal. People's answers to the run's
// requests arrive through inbox (nil: the run takes no answers). Cancelling
// ctx cancels the run (model stream and running tools).
//
// A run whose events cannot be stored does not go on unrecorded: the first
// failed append cancels it, and Run makes one last attempt to record
// run.failed with CodeStoreError. Run returns an error only when the
// journal failed; the run's end may then be missing from the log.
func (a *Agent) Run(ctx context.Context, spec Spec, j Journal, inbox *Inbox) error {
	if inbox == nil {
		inbox = NewInbox()
	}
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	live := a.cfg.LiveDeltas > 0 && j.Previews()
	em := newEmitter(ctx, j, spec.Thread, spec.Run, a.cfg.CoalesceDeltas || live, func(err error) { stop(fmt.Errorf("%w: %w", errJournal, err)) })
	if live {
		em.previewing(j, a.cfg.LiveDeltas, a.cfg.LiveDeltasUnwatched, spec.After)
	}
	r := newRun(a, spec, em, inbox)
	r.ctx = ctx
	r.execute(ctx)
	err := em.close()
	if err != nil {
		r.log.Error("run stopped: its events could not be stored", "err", err)
		end := event.New(spec.Thread, spec.Run, event.RunFailed{Code: event.CodeStoreError,
			Message: "The run stopped: its events could not be stored."})
		if _, aerr := j.Append(context.WithoutCancel(ctx), end); aerr != nil {
			r.log.Error("record the run's end", "err", aerr)
		}
	}
	return err
}

// errJournal is the cause a run is cancelled with when its journal fails.
var errJournal = errors.New("the run's events could not be stored")

// ErrSuperseded, as the cause of a run's cancellation, says another server
// has taken the run's thread over and ended the run in its log: the run
// stops, records nothing more and runs no tool.
var ErrSuperseded = errors.New("the run's thread was taken over by another server")

// ErrUndone, as the cause of a run's cancellation, says the run was started
// ahead of the commit that would have made the thread its own (the runs
// package does that), and that commit did not: like a superseded run, it
// stops, records nothing more and runs no tool. It is not ErrSuperseded,
// so that logs and callers can tell a start given up on this server from
// a thread another server took over.
var ErrUndone = errors.New("the run started ahead of a commit that did not make the thread its own")

// run is the state of one run.
type run struct {
	ctx        context.Context // the run's, for its cancellation cause
	a          *Agent
	spec       Spec
	em         *emitter
	inbox      *Inbox
	log        *slog.Logger
	model      llm.Model
	tools      Toolbox
	system     string
	name       string // the agent speaking, in events (group.go changes it)
	msgs       []llm.Message
	remembered *memory // shared by the run's forks
	lastReply  string
	// context accounting (context.go): the last conversation call's
	// usage, the count it calibrates, and whether compaction failed
	lastUsage     llm.Usage
	calib         calibration
	compactFailed bool
	// voice, in a got node's run, holds its events back while another
	// node's are going out (see stage); nil elsewhere.
	voice *voice
	// ids are the tool call ids the run has used, shared by its forks.
	ids *callIDs
}

func newRun(a *Agent, spec Spec, em *emitter, inbox *Inbox) *run {
	r := &run{a: a, spec: spec, em: em, inbox: inbox, model: a.cfg.Model, tools: a.cfg.Tools, system: a.cfg.System, name: a.cfg.Name,
		ids: &callIDs{seen: map[string]bool{}}}
	if spec.Strategy == "" {
		r.spec.Strategy = "react"
	}
	if spec.Compact {
		r.spec.Strategy = event.StrategyCompact
	}
	if spec.Model != nil {
		r.model = spec.Model
	}
	if spec.Tools != nil {
		r.tools = spec.Tools
	}
	if spec.System != "" {
		r.system = spec.System
	}
	log := a.cfg.Logger
	if spec.Logger != nil {
		log = spec.Logger
	}
	r.log = log.With("thread", spec.Thread, "run", spec.Run)
	return r
}

func (r *run) emit(p event.Payload) {
	if r.superseded() {
		return
	}
	switch p := p.(type) {
	case event.RunStarted:
		r.a.cfg.Metrics.RunStarted()
	case event.RunCompleted:
		r.a.cfg.Metrics.RunFinished("completed")
	case event.RunCancelled:
		r.a.cfg.Metrics.RunFinished("cancelled")
	case event.RunFailed:
		r.a.cfg.Metrics.RunFinished(string(p.Code))
	}
	if r.voice != nil {
		r.voice.say(r.em, p)
		return
	}
	_ = r.em.emit(p)
}

// flush waits until every event the run emitted is committed; a got node
// first waits for its turn to be heard.
func (r *run) flush() error {
	if r.voice != nil {
		r.voice.takeStage(r.em)
	}
	return r.em.flush()
}

// superseded reports whether the run records nothing more: another server
// has taken it over (ErrSuperseded), or its start was undone (ErrUndone).
func (r *run) superseded() bool { return superseded(r.ctx) }

func superseded(ctx context.Context) bool {
	cause := context.Cause(ctx)
	return errors.Is(cause, ErrSuperseded) || errors.Is(cause, ErrUndone)
}

// execute starts the run, rebuilds the model's transcript from the log and
// hands over to the run's strategy.
func (r *run) execute(ctx context.Context) {
	r.emit(event.RunStarted{Strategy: r.spec.Strategy, Agent: r.a.cfg.Name, Input: r.spec.Input})
	strategy, ok := strategies[r.spec.Strategy]
	if !ok && !r.spec.Compact {
		r.end(ctx, fmt.Errorf("unknown strategy %q (want one of %s)", r.spec.Strategy, strings.Join(Strategies(), ", ")), event.CodeInternal)
		return
	}
	hist, err := r.em.j.History(ctx)
	if err != nil {
		r.end(ctx, fmt.Errorf("read history: %w", err), event.CodeInternal)
		return
	}
	r.msgs = Transcript(hist)
	r.remembered = &memory{keys: rememberedKeys(hist)}
	r.calibrateFrom(hist)
	if r.spec.Compact {
		r.compactRun(ctx)
		return
	}
	strategy(ctx, r)
}

// react is the ReAct loop: think (one model call), act (run the tools it
// called), observe (their results join the transcript), until the model
// answers without calling a tool or the step limit is reached.
func react(ctx context.Context, r *run) {
	reply, err := r.loop(ctx, false)
	if err != nil {
		r.fail(ctx, err)
		return
	}
	r.emit(event.RunCompleted{Reason: "final_answer", Reply: reply})
}

// maxSteps is the run's limit of model calls per loop.
func (r *run) maxSteps() int {
	if r.spec.MaxSteps > 0 {
		return r.spec.MaxSteps
	}
	return r.a.cfg.MaxSteps
}

// failure is an error that ends a run with a run.failed code.
type failure struct {
	code string
	err  error
}

func (f *failure) Error() string { return f.err.Error() }
func (f *failure) Unwrap() error { return f.err }

// fail ends the run for err (see end), with err's failure code.
func (r *run) fail(ctx context.Context, err error) {
	code := event.CodeInternal
	var f *failure
	if errors.As(err, &f) {
		code = f.code
	}
	r.end(ctx, err, code)
}

// loop is the ReAct loop on r.msgs: think, act on the calls, observe their
// results (with an "observe" node when observe is set), until the model
// answers without calling a tool, which loop returns; or until the step
// limit, a model error or a stopped act, which it returns as a *failure.
func (r *run) loop(ctx context.Context, observe bool) (string, error) {
	limit := r.maxSteps()
	for step := 0; ; step++ {
		if step == limit {
			//lint:ignore ST1005 the text is the run.failed message people read, a sentence
			return "", &failure{event.CodeStepLimit, fmt.Errorf("The agent reached its limit of %d model calls without a final answer.", limit)}
		}
		turn, err := r.think(ctx)
		if err != nil {
			return "", &failure{event.CodeModelError, fmt.Errorf("model error: %w", err)}
		}
		r.msgs = append(r.msgs, turn)
		if turn.Content != "" {
			r.lastReply = turn.Content
		}
		if len(turn.ToolCalls) == 0 {
			return r.lastReply, nil
		}
		if err := r.act(ctx, turn.ToolCalls); err != nil {
			return "", &failure{event.CodeToolError, err}
		}
		if observe {
			r.emit(event.NodeEntered{Node: "observe"})
			r.emit(event.NodeExited{Node: "observe"})
		}
	}
}

// end writes the run's last event for err: cancelled when ctx is done (or a
// person stopped the run); for a call a budget refused, budget.exceeded
// and run.failed with CodeBudgetExceeded; else failed with code.
func (r *run) end(ctx context.Context, err error, code string) {
	var refused *budgetError
	switch {
	case errors.Is(context.Cause(ctx), errJournal):
		// Nothing more can be recorded; Run makes a last attempt.
	case superseded(ctx):
		// Another server ended the run, or its start was undone.
	case errors.Is(err, errStop):
		r.emit(event.RunCancelled{Reason: event.CodeDenied})
	case ctx.Err() != nil:
		r.emit(event.RunCancelled{Reason: "cancelled"})
	case errors.As(err, &refused):
		r.log.Info("run refused a model call: budget exceeded", "principal", refused.ex.Principal, "limit", refused.ex.Limit)
		r.emit(refused.ex)
		r.emit(event.RunFailed{Code: event.CodeBudgetExceeded, Message: refused.ex.Message})
	default:
		r.log.Warn("run failed", "err", err)
		r.emit(event.RunFailed{Code: code, Message: err.Error()})
	}
}
