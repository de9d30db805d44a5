package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/llm"
	"github.com/agentwire/agentwire/internal/metrics"
	"github.com/agentwire/agentwire/internal/tools"
	"github.com/agentwire/agentwire/internal/tracing"
)

// job is a tool call cleared to run.
type job struct {
	call  llm.ToolCall
	tool  tools.Tool
	class tools.Class
	// level is the sandbox level the verdict gave the call: the tool runs
	// its programs at it (tools.WithLevel).
	level tools.Level
	// edited is the patch a person edited before approving the call; it
	// runs instead of the model's.
	edited string
}

// act handles the tool calls of one turn: it judges each call, asks a
// person where needed (in call order), then runs the cleared calls — all at
// once when every one of them only reads, else one after another in order.
// Every call gets exactly one tool.exec.completed.
func (r *run) act(ctx context.Context, calls []llm.ToolCall) error {
	r.emit(event.NodeEntered{Node: "act"})
	defer r.emit(event.NodeExited{Node: "act"})

	var jobs []job
	var stopped error
	for _, c := range calls {
		if stopped != nil {
			r.result(c, "Not run: the user stopped the run.", event.OutcomeCancelled)
			continue
		}
		t, ok := r.tools.Get(c.Name)
		if !ok {
			r.result(c, fmt.Sprintf("There is no tool named %q.", c.Name), event.OutcomeFailed)
			continue
		}
		args := json.RawMessage(c.Arguments)
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(args, &obj); err != nil {
			r.result(c, "The arguments are not a JSON object: "+err.Error(), event.OutcomeFailed)
			continue
		}
		class := t.Classify(args)
		verdict := r.a.cfg.Policy.Decide(class, r.remembered.has)
		r.a.cfg.Metrics.ToolJudged(c.Name, verdictName(verdict))
		switch verdict {
		case tools.Run:
			jobs = append(jobs, job{c, t, class, r.a.cfg.Policy.Level(class, false, r.remembered.has), ""})
		case tools.Refuse:
			r.result(c, "Refused: the approval policy does not allow this call.", event.OutcomeRefused)
		case tools.Ask:
			if !r.spec.Interactive {
				// Said once, in the call's result, which every protocol
				// shows (and the model reads).
				why := fmt.Sprintf("Not run: %s needs approval, and this conversation's connection cannot ask for it. Approve such calls over a protocol that can ask (AgentLoop, AG2, Loom), or start agentwire with --approval-policy auto-edit (edits) or full-auto (commands too, confined by the OS sandbox).", describe(c, class))
				r.result(c, why, event.OutcomeRefused)
				continue
			}
			ans, err := r.askApproval(ctx, c, t, class)
			if err != nil {
				r.result(c, "Not run: the run was cancelled while waiting for approval.", event.OutcomeCancelled)
				return err
			}
			switch ans.Decision {
			case event.DecisionApprove, event.DecisionApproveAlways:
				if ans.Decision == event.DecisionApproveAlways && class.Key != "" {
					r.remembered.add(class.Key)
					r.systemMessage(remembering(class))
				}
				j := job{c, t, class, r.a.cfg.Policy.Level(class, true, r.remembered.has), ""}
				if ans.Patch != "" {
					j.edited = ans.Patch
				}
				jobs = append(jobs, j)
			case event.DecisionDenyStop:
				r.result(c, denial(ans.Text, "The user denied this call and stopped the run."), event.OutcomeRefused)
				stopped = errStop
			default: // deny_continue
				r.result(c, denial(ans.Text, "The user denied this call. Continue without it, or ask the user how to proceed."), event.OutcomeRefused)
			}
		}
	}
	if stopped != nil {
		for _, j := range jobs {
			r.result(j.call, "Not run: the user stopped the run.", event.OutcomeCancelled)
		}
		return stopped
	}

	parallel := len(jobs) > 1
	for _, j := range jobs {
		if j.class.Effect != tools.EffectRead && j.class.Effect != tools.EffectNetwork {
			parallel = false
		}
	}
	if parallel {
		var wg sync.WaitGroup
		results := make([]tools.Result, len(jobs))
		for i, j := range jobs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i] = r.exec(ctx, j)
			}()
		}
		wg.Wait()
		for i, j := range jobs {
			r.answer(j.call, results[i])
		}
	} else {
		for _, j := range jobs {
			r.answer(j.call, r.exec(ctx, j))
			if ctx.Err() != nil {
				break
			}
		}
	}
	if ctx.Err() != nil {
		// Calls that never ran still need their result.
		for _, j := range jobs {
			if !r.answered(j.call.ID) {
				r.result(j.call, "Not run: the run was cancelled.", event.OutcomeCancelled)
			}
		}
		return ctx.Err()
	}
	return nil
}

// exec runs one call, streaming its output, and writes tool.exec.started
// and tool.exec.completed.
func (r *run) exec(ctx context.Context, j job) tools.Result {
	r.emit(event.ToolExecStarted{CallID: j.call.ID, Name: j.call.Name})
	// A tool changes the world: it runs only once its call is in the log,
	// and never for a run whose events are dropped (superseded, or
	// undone before it was the thread's).
	if err := r.flush(); err != nil || r.superseded() {
		return tools.Result{Content: "Not run: the run's events could not be stored.", IsError: true}
	}
	out := func(stream, text string) {
		r.emit(event.ToolExecOutput{CallID: j.call.ID, Name: j.call.Name, Stream: stream, Text: text})
	}
	tctx := tools.WithLevel(ctx, j.level)
	if r.spec.Interactive {
		tctx = tools.WithAsker(tctx, &asker{r: r, tool: j.call.Name})
	}
	args := json.RawMessage(j.call.Arguments)
	if j.edited != "" {
		// askApproval checked that the tool takes an edited patch.
		args, _ = j.tool.(tools.PatchEditor).WithPatch(args, j.edited)
	}
	tctx, span := tracing.Start(tctx, "agentwire.tool", attribute.String("agentwire.tool", j.call.Name),
		attribute.String("agentwire.sandbox", j.level.String()))
	defer span.End()
	began := time.Now()
	res, err := j.tool.Run(tctx, args, out)
	took := time.Since(began)
	r.a.cfg.Metrics.ToolRan(j.call.Name, took)
	outcome := event.OutcomeOK
	switch {
	case ctx.Err() != nil:
		res, outcome = tools.Result{Content: "Cancelled.", IsError: true}, event.OutcomeCancelled
	case errors.Is(err, tools.ErrInputTimedOut):
		res, outcome = tools.Result{Content: err.Error(), IsError: true}, event.OutcomeTimedOut
	case err != nil:
		res, outcome = tools.Result{Content: err.Error(), IsError: true}, event.OutcomeFailed
	case res.TimedOut:
		outcome = event.OutcomeTimedOut
	case res.IsError:
		outcome = event.OutcomeFailed
	}
	if j.edited != "" {
		res.Content = "The user edited the patch before approving it; this is the patch that was applied:\n" + j.edited + "\n\n" + res.Content
	}
	if len(res.Content) > r.a.cfg.MaxResultBytes {
		res.Content = truncate(res.Content, r.a.cfg.MaxResultBytes)
	}
	r.emit(event.ToolExecCompleted{CallID: j.call.ID, Name: j.call.Name, Result: res.Content, IsError: res.IsError,
		Outcome: outcome, ExitCode: res.ExitCode, DurationMS: max(took.Milliseconds(), 1)})
	span.SetAttributes(attribute.String("agentwire.outcome", string(outcome)))
	if outcome != event.OutcomeOK {
		span.SetStatus(codes.Error, string(outcome))
	}
	return res
}

// result answers a call that did not run, with why.
func (r *run) result(c llm.ToolCall, text string, outcome event.Outcome) {
	isErr := outcome != event.OutcomeOK
	r.emit(event.ToolExecCompleted{CallID: c.ID, Name: c.Name, Result: text, IsError: isErr, Outcome: outcome})
	r.answer(c, tools.Result{Content: text, IsError: isErr})
}

// answer adds a call's result to the model's history.
func (r *run) answer(c llm.ToolCall, res tools.Result) {
	r.msgs = append(r.msgs, llm.Message{Role: llm.RoleTool, ToolCallID: c.ID, Name: c.Name, Content: res.Content, IsError: res.IsError})
}

func (r *run) answered(id string) bool {
	for _, m := range r.msgs {
		if m.Role == llm.RoleTool && m.ToolCallID == id {
			return true
		}
	}
	return false
}

// askApproval writes tool.approval.requested and waits for the decision,
// which it returns as the answering command (Decision normalised, Patch
// set only to an edited patch that approves a patch call). On "explain"
// the model explains the call and the same request stands again; so it
// does after an edited patch that does not parse, which the answering
// client should have refused already.
func (r *run) askApproval(ctx context.Context, c llm.ToolCall, t tools.Tool, class tools.Class) (cmd event.Command, err error) {
	ctx, span := tracing.Start(ctx, "agentwire.approval", attribute.String("agentwire.tool", c.Name))
	defer func() {
		span.SetAttributes(attribute.String("agentwire.decision", string(cmd.Decision)))
		span.End()
	}()
	for {
		wait := r.inbox.register(c.ID, event.CommandApprove)
		r.emit(event.ToolApprovalRequested{
			CallID: c.ID, Name: c.Name, Arguments: json.RawMessage(c.Arguments),
			Command: class.Command, Patch: class.Patch, Key: class.Key,
			Reason: approvalReason(class), Agent: r.name,
		})
		if err := r.flush(); err != nil {
			r.inbox.unregister(c.ID)
			return event.Command{}, err
		}
		answered := r.a.cfg.Metrics.ApprovalWaiting()
		cmd, err := wait(ctx)
		answered()
		if err != nil {
			return event.Command{}, err
		}
		switch cmd.Decision {
		case event.DecisionApprove, event.DecisionApproveAlways, event.DecisionDenyContinue, event.DecisionDenyStop, event.DecisionExplain:
		default:
			cmd.Decision = event.DecisionDenyContinue
		}
		approving := cmd.Decision == event.DecisionApprove || cmd.Decision == event.DecisionApproveAlways
		if !approving || cmd.Patch == class.Patch {
			cmd.Patch = ""
		}
		if cmd.Patch != "" {
			if why := editablePatch(t, class, cmd.Patch); why != "" {
				r.systemMessage("The edited patch was not applied: " + why + " The approval request stands.")
				continue
			}
		}
		r.emit(event.ToolApprovalResolved{CallID: c.ID, Decision: cmd.Decision, Message: cmd.Text, Patch: cmd.Patch})
		if cmd.Decision != event.DecisionExplain {
			return cmd, nil
		}
		if err := r.explain(ctx, c); err != nil && ctx.Err() != nil {
			return event.Command{}, ctx.Err()
		}
	}
}

// editablePatch says why patch cannot replace the patch of a call of t
// classified as class, or "" when it can.
func editablePatch(t tools.Tool, class tools.Class, patch string) string {
	if class.Patch == "" {
		return "the call is not a patch."
	}
	if _, ok := t.(tools.PatchEditor); !ok {
		return "the " + t.Spec().Name + " tool takes no edited patch."
	}
	if _, err := tools.ParsePatch(patch); err != nil {
		return err.Error() + "."
	}
	return ""
}

// explain asks the model to explain a pending call. The explanation is a
// message marked as such: shown to people, left out of later history.
func (r *run) explain(ctx context.Context, c llm.ToolCall) error {
	// The history up to, not including, the turn that made the call: a
	// provider rejects a question after unanswered calls.
	msgs := r.msgs
	if n := len(msgs); n > 0 && msgs[n-1].Role == llm.RoleAssistant {
		msgs = msgs[:n-1]
	}
	q := fmt.Sprintf("Before the user approves it, explain in two or three sentences what this tool call does and why it is needed, and any risk it carries.\n\nTool: %s\nArguments: %s", c.Name, c.Arguments)
	msgs = append(append([]llm.Message(nil), msgs...), llm.Message{Role: llm.RoleUser, Content: q})
	_, err := r.stream(ctx, llm.Request{System: r.system, Messages: msgs}, event.PurposeExplanation)
	return err
}

// systemMessage writes a complete system message (shown to people, not part
// of the model's history).
func (r *run) systemMessage(text string) {
	id := event.NewID()
	r.emit(event.MessageStarted{MessageID: id, Role: event.RoleSystem})
	r.emit(event.MessageDelta{MessageID: id, Text: text})
	r.emit(event.MessageCompleted{MessageID: id, Role: event.RoleSystem, Text: text})
}

// remembering says what an approve-always answer approved for the rest of
// the thread: one exact command line, every command of one program, or
// every call of one tool.
func remembering(class tools.Class) string {
	switch {
	case tools.IsLineKey(class.Key):
		return "Approved always: this exact command line now runs without asking in this conversation: " + strings.TrimPrefix(class.Key, "$ ")
	case class.Effect == tools.EffectCommand:
		return "Approved always: commands that run only " + class.Key + " now run without asking in this conversation."
	}
	return "Approved always: " + class.Key + " calls now run without asking in this conversation."
}

// describe names a call for people: its command line, or the tool.
func describe(c llm.ToolCall, class tools.Class) string {
	if len(class.Command) > 0 {
		return "the command `" + strings.Join(class.Command, " ") + "`"
	}
	return "the " + c.Name + " call"
}

func approvalReason(c tools.Class) string {
	switch c.Effect {
	case tools.EffectEdit:
		return "This call changes files in the working folder."
	case tools.EffectNetwork:
		return "This call reaches the network."
	case tools.EffectCommand:
		return "This call runs a command: " + strings.Join(c.Command, " ")
	}
	return "This call needs approval."
}

// denial is what the model is told of a denied call: "aborted", as Codex
// tells it, then the person's message or a default one.
func denial(msg, fallback string) string {
	if strings.TrimSpace(msg) != "" {
		return "aborted\nThe user denied this call: " + msg
	}
	return "aborted\n" + fallback
}

func truncate(s string, n int) string {
	cut := n
	for cut > 0 && cut < len(s) && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n[output truncated: %d of %d bytes shown]", cut, len(s))
}

// verdictName is v as the metrics name it.
func verdictName(v tools.Verdict) string {
	switch v {
	case tools.Run:
		return metrics.VerdictRan
	case tools.Refuse:
		return metrics.VerdictRefused
	}
	return metrics.VerdictAsked
}
