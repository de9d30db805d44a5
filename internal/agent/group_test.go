package agent_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/agent"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/llm"
	"github.com/agentwire/agentwire/internal/llm/scripted"
	"github.com/agentwire/agentwire/internal/tools"
	"github.com/agentwire/agentwire/internal/workflow"
)

// team is a planner → coder → reviewer workflow for testdata/group.yaml;
// extra is YAML for the workflow's other fields.
func team(t *testing.T, extra string) *workflow.Workflow {
	t.Helper()
	w, err := workflow.Parse("team", "team.yaml", []byte(extra+`
agents:
  - name: planner
    description: Plans.
    system: You are the planner.
    tools: []
  - name: coder
    description: Codes.
    system: You are the coder.
    tools: [ls, read]
  - name: reviewer
    description: Reviews.
    system: You are the reviewer.
`))
	require.NoError(t, err)
	return w
}

// startGroup commits the user's message and starts a group run of wf.
func (e *env) startGroup(a *agent.Agent, wf *workflow.Workflow, text string, interactive bool, models map[string]llm.Model) *running {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	e.t.Cleanup(cancel)
	spec := agent.Spec{Thread: e.thread, Run: event.NewID(), Input: text, Interactive: interactive,
		Strategy: "group", Workflow: wf, Models: models}
	j := newJournal(e.store, e.thread)
	_, err := e.store.Append(ctx, e.thread, event.New(e.thread, spec.Run, event.MessageUser{MessageID: event.NewID(), Text: text}))
	require.NoError(e.t, err)
	r := &running{j: j, inbox: agent.NewInbox(), cancel: cancel, done: make(chan error, 1), spec: spec}
	go func() { r.done <- a.Run(ctx, spec, j, r.inbox) }()
	return r
}

// speakers lists the agent.selected events of a run as "agent/how".
func speakers(evs []event.Event) []string {
	var out []string
	for _, p := range payloads[event.AgentSelected](evs) {
		out = append(out, p.Agent+"/"+p.Selection)
	}
	return out
}

// saidBy lists the run's assistant messages as "agent: text".
func saidBy(evs []event.Event) []string {
	var out []string
	for _, p := range payloads[event.MessageCompleted](evs) {
		out = append(out, p.Agent+": "+p.Text)
	}
	return out
}

// checkAgents checks that every message and tool call of a run is its
// selected speaker's: message.started, message.completed, tool.call.* and
// tool.approval.requested name the agent of the agent.selected before them.
func checkAgents(t *testing.T, evs []event.Event) {
	t.Helper()
	cur := ""
	for _, e := range evs {
		switch p := e.Payload.(type) {
		case event.AgentSelected:
			cur = p.Agent
			assert.NotZero(t, p.Round)
		case event.MessageStarted:
			if p.Role == event.RoleAssistant {
				assert.Equal(t, cur, p.Agent, "message.started")
			}
		case event.MessageCompleted:
			if p.Role == event.RoleAssistant {
				assert.Equal(t, cur, p.Agent, "message.completed")
			}
		case event.ToolCallStarted:
			assert.Equal(t, cur, p.Agent, "tool.call.started")
		case event.ToolCallCompleted:
			assert.Equal(t, cur, p.Agent, "tool.call.completed")
		case event.ToolApprovalRequested:
			assert.Equal(t, cur, p.Agent, "tool.approval.requested")
		}
	}
}

func TestGroupRoundRobin(t *testing.T) {
	e := newEnv(t, "group")
	wf := team(t, "termination: {after: reviewer}")
	evs := e.wait(e.startGroup(e.agent(agent.Config{}), wf, "do the task", false, nil))
	checkIDs(t, evs)
	checkAgents(t, evs)

	assert.Equal(t, "group", only[event.RunStarted](t, evs).Strategy)
	assert.Equal(t, []string{"planner/round_robin", "coder/round_robin", "reviewer/round_robin"}, speakers(evs))
	assert.Equal(t, []string{
		"planner: PLAN: 1. list the folder. 2. review.",
		"coder: Listed 1 entries.",
		"reviewer: Reviewed: fine.",
	}, saidBy(evs))
	assert.Equal(t, event.RunCompleted{Reason: event.ReasonCompleted, Reply: "Reviewed: fine."}, only[event.RunCompleted](t, evs))
	assert.Equal(t, []int{1, 2, 3}, rounds(evs))

	// Each agent saw the others' turns as user messages, its own tools only.
	reqs := e.model.requests()
	require.Len(t, reqs, 4, "planner, coder twice (ls, then its answer), reviewer")
	assert.Equal(t, "You are the planner.", reqs[0].System)
	assert.Empty(t, reqs[0].Tools, "tools: [] is no tools")
	assert.Equal(t, []llm.Message{{Role: llm.RoleUser, Content: "do the task"}}, reqs[0].Messages)
	assert.Equal(t, "You are the coder.", reqs[1].System)
	assert.Equal(t, []string{"ls", "read"}, toolNames(reqs[1]))
	assert.Equal(t, []llm.Message{{Role: llm.RoleUser, Content: "do the task"}, {Role: llm.RoleUser, Content: "planner: PLAN: 1. list the folder. 2. review."}}, reqs[1].Messages)
	assert.Len(t, toolMessages(reqs[2]), 1, "the coder sees its own tool result")
	assert.Equal(t, "You are the reviewer.", reqs[3].System)
	assert.Greater(t, len(reqs[3].Tools), 2, "no tools list: every tool")
	assert.Equal(t, []llm.Message{
		{Role: llm.RoleUser, Content: "do the task"},
		{Role: llm.RoleUser, Content: "planner: PLAN: 1. list the folder. 2. review."},
		{Role: llm.RoleUser, Content: "coder: Listed 1 entries."},
	}, reqs[3].Messages, "the coder's tool call and result stay private")
}

func rounds(evs []event.Event) []int {
	var out []int
	for _, p := range payloads[event.AgentSelected](evs) {
		out = append(out, p.Round)
	}
	return out
}

func toolNames(req llm.Request) []string {
	var out []string
	for _, s := range req.Tools {
		out = append(out, s.Name)
	}
	return out
}

func TestGroupMaxRounds(t *testing.T) {
	e := newEnv(t, "group")
	wf := team(t, "max_rounds: 4")
	evs := e.wait(e.startGroup(e.agent(agent.Config{}), wf, "do the task", false, nil))
	checkIDs(t, evs)
	checkAgents(t, evs)
	assert.Equal(t, []string{"planner/round_robin", "coder/round_robin", "reviewer/round_robin", "planner/round_robin"}, speakers(evs))
	end := only[event.RunCompleted](t, evs)
	assert.Equal(t, event.ReasonMaxRounds, end.Reason)
	assert.Equal(t, "PLAN: 1. list the folder. 2. review.", end.Reply)

	// The planner's second turn shows its first as its own.
	reqs := e.model.requests()
	last := reqs[len(reqs)-1]
	assert.Equal(t, []llm.Role{llm.RoleUser, llm.RoleAssistant, llm.RoleUser, llm.RoleUser}, roles(last.Messages))
	assert.Equal(t, "coder: Listed 1 entries.", last.Messages[2].Content)
	assert.Equal(t, "reviewer: Reviewed: fine.", last.Messages[3].Content)
}

func TestGroupTerminated(t *testing.T) {
	e := newEnv(t, "group")
	wf, err := workflow.Parse("quit", "quit.yaml", []byte(`
agents:
  - {name: planner, system: You are the planner.}
  - {name: quitter, system: You are the quitter.}
  - {name: reviewer, system: You are the reviewer.}
`))
	require.NoError(t, err)
	evs := e.wait(e.startGroup(e.agent(agent.Config{}), wf, "anything", false, nil))
	checkIDs(t, evs)
	assert.Equal(t, []string{"planner/round_robin", "quitter/round_robin"}, speakers(evs))
	assert.Equal(t, event.RunCompleted{Reason: event.ReasonTerminated, Reply: "Nothing to do. TERMINATE"}, only[event.RunCompleted](t, evs))

	// With the keyword off, the chat goes on to max_rounds.
	e = newEnv(t, "group")
	wf.Keyword = ""
	wf.MaxRounds = 3
	evs = e.wait(e.startGroup(e.agent(agent.Config{}), wf, "anything", false, nil))
	assert.Equal(t, event.ReasonMaxRounds, only[event.RunCompleted](t, evs).Reason)
}

func TestGroupAuto(t *testing.T) {
	e := newEnv(t, "group")
	wf := team(t, "speaker_selection: auto")
	evs := e.wait(e.startGroup(e.agent(agent.Config{}), wf, "do the task", false, nil))
	checkIDs(t, evs)
	checkAgents(t, evs)
	assert.Equal(t, []string{"planner/auto", "coder/auto", "reviewer/auto"}, speakers(evs))
	assert.Equal(t, event.ReasonCompleted, only[event.RunCompleted](t, evs).Reason, "the selector said DONE")

	var selection []event.Usage
	for _, u := range payloads[event.Usage](evs) {
		if u.Purpose == event.PurposeSelection {
			selection = append(selection, u)
		}
	}
	require.Len(t, selection, 4, "one selector call per turn and the last DONE")
	assert.Equal(t, int64(50), selection[0].PromptTokens)
	for _, m := range payloads[event.MessageCompleted](evs) {
		assert.NotContains(t, []string{"planner", "DONE"}, m.Text, "the selector's answers are not messages")
	}

	// The selector saw the agents' descriptions and the conversation.
	reqs := e.model.requests()
	assert.Contains(t, reqs[0].System, "next speaker")
	assert.Contains(t, reqs[0].System, "- coder: Codes.")
	assert.Contains(t, reqs[0].Messages[0].Content, "user: do the task")
	sel := reqs[len(reqs)-1]
	assert.Contains(t, sel.Messages[0].Content, "coder: Listed 1 entries.")
	assert.Contains(t, sel.Messages[0].Content, "The last speaker was reviewer.")
}

func TestGroupAutoRetriesOnce(t *testing.T) {
	e := newEnv(t, "group")
	wf := team(t, "speaker_selection: auto\ntermination: {after: coder}")
	evs := e.wait(e.startGroup(e.agent(agent.Config{}), wf, "hesitate, then go", false, nil))
	checkIDs(t, evs)
	assert.Equal(t, []string{"coder/auto"}, speakers(evs), "the second answer counts")
	assert.Equal(t, event.ReasonCompleted, only[event.RunCompleted](t, evs).Reason)
	reqs := e.model.requests()
	require.GreaterOrEqual(t, len(reqs), 2)
	assert.Equal(t, []llm.Role{llm.RoleUser, llm.RoleAssistant, llm.RoleUser}, roles(reqs[1].Messages))
	assert.Contains(t, reqs[1].Messages[2].Content, "planner, coder, reviewer, or DONE")
}

func roles(msgs []llm.Message) []llm.Role {
	var out []llm.Role
	for _, m := range msgs {
		out = append(out, m.Role)
	}
	return out
}

func TestGroupAutoFallsBack(t *testing.T) {
	e := newEnv(t, "group")
	wf := team(t, "speaker_selection: auto\ntermination: {after: planner}")
	evs := e.wait(e.startGroup(e.agent(agent.Config{}), wf, "confuse the selector", false, nil))
	checkIDs(t, evs)
	assert.Equal(t, []string{"planner/fallback"}, speakers(evs), "two bad answers: the next agent in order")
	assert.Equal(t, event.ReasonCompleted, only[event.RunCompleted](t, evs).Reason)
	exits := payloads[event.NodeExited](evs)
	assert.Contains(t, exits, event.NodeExited{Node: "select", Error: "no agent named; the next agent in order speaks"})
	assert.Equal(t, []string{`The speaker selector's answer named no agent of the workflow, even after a retry ("nobody knows"), so planner speaks next, as the agents' order says.`},
		systemNotes(evs), "people are told")
	reqs := e.model.requests()
	require.NotEmpty(t, reqs)
	require.NotNil(t, reqs[0].Structured, "the selector asks for structure")
	assert.JSONEq(t, `{"type": "object", "properties": {"speaker": {"type": "string", "enum": ["planner", "coder", "reviewer", "DONE"],
		"description": "the agent who speaks next, or DONE to hand the chat back to the user"}},
		"required": ["speaker"], "additionalProperties": false}`, string(reqs[0].Structured.JSON))
}

// A selector that answers in JSON is read as such.
func TestGroupAutoReadsJSON(t *testing.T) {
	e := newEnv(t, "group")
	wf := team(t, "speaker_selection: auto\ntermination: {after: coder}")
	evs := e.wait(e.startGroup(e.agent(agent.Config{}), wf, "pick in json", false, nil))
	checkIDs(t, evs)
	assert.Equal(t, []string{"coder/auto"}, speakers(evs))
}

func TestGroupManual(t *testing.T) {
	e := newEnv(t, "group")
	wf := team(t, "speaker_selection: manual")
	r := e.startGroup(e.agent(agent.Config{}), wf, "do the task", true, nil)
	ask := func(n int) event.InputRequested {
		return r.j.waitFor(t, n, ofType(event.TypeInputRequested)).Payload.(event.InputRequested)
	}
	req := ask(1)
	assert.Contains(t, req.Prompt, "1. planner: Plans.")
	assert.Contains(t, req.Prompt, "3. reviewer: Reviews.")
	assert.Equal(t, workflow.DefaultSelectionTimeout, req.TimeoutSeconds)
	r.answer(t, event.Command{Kind: event.CommandInput, ID: req.RequestID, Text: "2"})
	r.answer(t, event.Command{Kind: event.CommandInput, ID: ask(2).RequestID, Text: " Reviewer "})
	r.answer(t, event.Command{Kind: event.CommandInput, ID: ask(3).RequestID, Text: "the boss"})
	bad := ask(4)
	assert.Error(t, r.inbox.Deliver(event.Command{Kind: event.CommandInput, ID: ask(3).RequestID, Text: "coder"}), "an answered request is no longer pending")
	r.answer(t, event.Command{Kind: event.CommandInput, ID: bad.RequestID, Text: "done"})
	evs := e.wait(r)
	checkIDs(t, evs)
	checkAgents(t, evs)
	assert.Equal(t, []string{"coder/manual", "reviewer/manual"}, speakers(evs))
	assert.Equal(t, event.ReasonCompleted, only[event.RunCompleted](t, evs).Reason)
	var system []string
	for _, m := range payloads[event.MessageCompleted](evs) {
		if m.Role == event.RoleSystem {
			system = append(system, m.Text)
		}
	}
	require.Len(t, system, 1)
	assert.Contains(t, system[0], `"the boss" is not an agent of this workflow`)
	assert.Len(t, payloads[event.InputProvided](evs), 4)
}

func TestGroupManualTimesOut(t *testing.T) {
	e := newEnv(t, "group")
	wf := team(t, "speaker_selection: manual\nselection_timeout_seconds: 1\ntermination: {after: planner}")
	evs := e.wait(e.startGroup(e.agent(agent.Config{}), wf, "do the task", true, nil))
	checkIDs(t, evs)
	req := only[event.InputRequested](t, evs)
	assert.Equal(t, event.InputTimedOut{RequestID: req.RequestID, TimeoutSeconds: 1}, only[event.InputTimedOut](t, evs))
	assert.Equal(t, []string{"planner/fallback"}, speakers(evs))
	assert.Equal(t, event.ReasonCompleted, only[event.RunCompleted](t, evs).Reason)
}

func TestGroupManualWithoutAPerson(t *testing.T) {
	e := newEnv(t, "group")
	wf := team(t, "speaker_selection: manual\ntermination: {after: coder}")
	evs := e.wait(e.startGroup(e.agent(agent.Config{}), wf, "do the task", false, nil))
	checkIDs(t, evs)
	assert.Empty(t, payloads[event.InputRequested](evs))
	assert.Equal(t, []string{"planner/round_robin", "coder/round_robin"}, speakers(evs))
	sys := payloads[event.MessageCompleted](evs)[0]
	assert.Equal(t, event.RoleSystem, sys.Role)
	assert.Contains(t, sys.Text, "cannot ask")
}

func TestGroupCancelledWhileSelecting(t *testing.T) {
	e := newEnv(t, "group")
	wf := team(t, "speaker_selection: manual")
	r := e.startGroup(e.agent(agent.Config{}), wf, "do the task", true, nil)
	r.j.waitFor(t, 1, ofType(event.TypeInputRequested))
	r.cancel()
	evs := e.wait(r)
	checkIDs(t, evs)
	assert.Equal(t, event.RunCancelled{Reason: "cancelled"}, only[event.RunCancelled](t, evs))
}

// TestGroupDefaultWorkflow runs the built-in default workflow: one
// assistant with the agent's own prompt and tools, done after its turn.
func TestGroupDefaultWorkflow(t *testing.T) {
	e := newEnv(t, "group")
	c, err := workflow.New("")
	require.NoError(t, err)
	wf, err := c.Lookup(workflow.DefaultName)
	require.NoError(t, err)
	evs := e.wait(e.startGroup(e.agent(agent.Config{System: "server prompt"}), wf, "hi", false, nil))
	checkIDs(t, evs)
	assert.Equal(t, []string{"assistant/only"}, speakers(evs))
	assert.Equal(t, []string{"assistant: Hello from the assistant."}, saidBy(evs))
	assert.Equal(t, event.RunCompleted{Reason: event.ReasonCompleted, Reply: "Hello from the assistant."}, only[event.RunCompleted](t, evs))
	assert.Equal(t, "server prompt", e.model.requests()[0].System)
	assert.Equal(t, len(e.tools.Specs()), len(e.model.requests()[0].Tools))
}

// TestGroupContinues checks that a second run of a workflow rebuilds each
// agent's view from the log: its own earlier turns are its own, the
// others' are user messages.
func TestGroupContinues(t *testing.T) {
	e := newEnv(t, "group")
	wf := team(t, "termination: {after: coder}")
	a := e.agent(agent.Config{})
	e.wait(e.startGroup(a, wf, "first task", false, nil))
	e.reopen()
	a = e.agent(agent.Config{})
	evs := e.wait(e.startGroup(a, wf, "second task", false, nil))
	checkIDs(t, evs)
	reqs := e.model.requests()
	planner := reqs[0]
	assert.Equal(t, []llm.Role{llm.RoleUser, llm.RoleAssistant, llm.RoleUser, llm.RoleUser}, roles(planner.Messages))
	assert.Equal(t, "coder: Listed 1 entries.", planner.Messages[2].Content)
	assert.Equal(t, "second task", planner.Messages[3].Content)
	coder := reqs[1]
	assert.Equal(t, []llm.Role{llm.RoleUser, llm.RoleUser, llm.RoleAssistant, llm.RoleTool, llm.RoleAssistant, llm.RoleUser, llm.RoleUser}, roles(coder.Messages),
		"the coder's earlier tool call and result are its own")
	assert.True(t, strings.HasPrefix(coder.Messages[1].Content, "planner: PLAN"))
}

func TestGroupAgentModel(t *testing.T) {
	e := newEnv(t, "group")
	wf := team(t, "termination: {after: planner}")
	wf.Agents[0].Model = "other"
	other := &recorder{Model: scripted.New(scenario(t, "group"), scripted.WithPacing(scripted.Pacing{}))}
	evs := e.wait(e.startGroup(e.agent(agent.Config{}), wf, "do the task", false, map[string]llm.Model{"other": other}))
	checkIDs(t, evs)
	assert.Len(t, other.requests(), 1, "the planner ran on its own model")
	assert.Empty(t, e.model.requests())

	e = newEnv(t, "group")
	evs = e.wait(e.startGroup(e.agent(agent.Config{}), wf, "do the task", false, nil))
	f := only[event.RunFailed](t, evs)
	assert.Equal(t, event.CodeInternal, f.Code)
	assert.Contains(t, f.Message, `model "other" is not available`)
}

func TestGroupWithoutWorkflow(t *testing.T) {
	e := newEnv(t, "group")
	evs := e.wait(e.startGroup(e.agent(agent.Config{}), nil, "hi", false, nil))
	assert.Equal(t, event.CodeInternal, only[event.RunFailed](t, evs).Code)
}

// TestGroupDevTeamOffline plays the built-in dev-team workflow on the
// built-in scripted scenario in each selection mode: it needs no model.
func TestGroupDevTeamOffline(t *testing.T) {
	c, err := workflow.New("")
	require.NoError(t, err)
	for _, mode := range []workflow.Selection{workflow.RoundRobin, workflow.Auto, workflow.Manual} {
		t.Run(string(mode), func(t *testing.T) {
			e := newEnv(t, "group")
			e.model = &recorder{Model: scripted.New(scripted.Default(), scripted.WithPacing(scripted.Pacing{}))}
			wf, err := c.Lookup("dev-team")
			require.NoError(t, err)
			wf.Selection = mode
			if mode != workflow.RoundRobin {
				wf.After = "" // the selection ends the chat: DONE, done
			}
			r := e.startGroup(e.agent(agent.Config{}), wf, "add a feature", true, nil)
			if mode == workflow.Manual {
				for i, pick := range []string{"planner", "coder", "3", "done"} {
					req := r.j.waitFor(t, i+1, ofType(event.TypeInputRequested)).Payload.(event.InputRequested)
					r.answer(t, event.Command{Kind: event.CommandInput, ID: req.RequestID, Text: pick})
				}
			}
			evs := e.wait(r)
			checkIDs(t, evs)
			checkAgents(t, evs)
			how := string(mode)
			if mode == workflow.RoundRobin {
				how = event.SelectionRoundRobin
			}
			assert.Equal(t, []string{"planner/" + how, "coder/" + how, "reviewer/" + how}, speakers(evs))
			said := saidBy(evs)
			require.Len(t, said, 4, "%q", said)
			assert.Contains(t, said[0], "planner: Here is the plan")
			assert.Contains(t, said[2], "The working folder holds 1 entry:")
			assert.Contains(t, said[3], "reviewer: Review:")
			assert.Equal(t, event.ReasonCompleted, only[event.RunCompleted](t, evs).Reason)
		})
	}
}

func TestGroupManualGivesUp(t *testing.T) {
	e := newEnv(t, "group")
	wf := team(t, "speaker_selection: manual\ntermination: {after: planner}")
	r := e.startGroup(e.agent(agent.Config{}), wf, "do the task", true, nil)
	for i, answer := range []string{"x", "planner and coder", "99"} {
		req := r.j.waitFor(t, i+1, ofType(event.TypeInputRequested)).Payload.(event.InputRequested)
		r.answer(t, event.Command{Kind: event.CommandInput, ID: req.RequestID, Text: answer})
	}
	evs := e.wait(r)
	checkIDs(t, evs)
	assert.Equal(t, []string{"planner/fallback"}, speakers(evs), "three wrong answers: the next agent in order")
	assert.Len(t, payloads[event.InputRequested](evs), 3)
	var system []string
	for _, m := range payloads[event.MessageCompleted](evs) {
		if m.Role == event.RoleSystem {
			system = append(system, m.Text)
		}
	}
	require.Len(t, system, 3)
	assert.Contains(t, system[2], "planner speaks next")
}

// TestGroupApprovalAndInputName checks that a workflow agent's input and
// approval requests name it, and are answered as any run's are.
func TestGroupApprovalAndInputName(t *testing.T) {
	e := newEnv(t, "group")
	wf, err := workflow.Parse("build", "build.yaml", []byte(`
agents:
  - {name: planner, system: You are the planner., tools: []}
  - {name: builder, system: You are the builder., tools: [ask_user, bash]}
termination: {after: builder}
`))
	require.NoError(t, err)
	r := e.startGroup(e.agent(agent.Config{Policy: tools.PolicySuggest}), wf, "build it", true, nil)
	in := r.j.waitFor(t, 1, ofType(event.TypeInputRequested)).Payload.(event.InputRequested)
	assert.Equal(t, "builder", in.Agent)
	r.answer(t, event.Command{Kind: event.CommandInput, ID: in.RequestID, Text: "built.txt"})
	ap := r.j.waitFor(t, 1, ofType(event.TypeToolApprovalRequested)).Payload.(event.ToolApprovalRequested)
	assert.Equal(t, "builder", ap.Agent)
	assert.Equal(t, []string{"touch", "built.txt"}, ap.Command)
	r.answer(t, event.Command{Kind: event.CommandApprove, ID: ap.CallID, Decision: event.DecisionApprove})
	evs := e.wait(r)
	checkIDs(t, evs)
	checkAgents(t, evs)
	assert.Equal(t, event.RunCompleted{Reason: event.ReasonCompleted, Reply: "Built."}, only[event.RunCompleted](t, evs))
	_, err = os.Stat(filepath.Join(e.workdir, "built.txt"))
	assert.NoError(t, err)
}
