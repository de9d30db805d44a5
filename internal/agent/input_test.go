package agent_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/agent"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/tools"
)

// askThink is the first think node of a scenario that calls one tool with
// no text.
func askThink(tool, args string) []string {
	return []string{
		"run.started react",
		"node.entered think",
		"tool.call.started " + tool, "tool.call.delta " + quote(args), "tool.call.completed " + tool,
		"usage",
		"node.exited think",
	}
}

func TestInputProvided(t *testing.T) {
	e := newEnv(t, "input")
	r := e.start(e.agent(agent.Config{}), "ask my name", true)
	req := r.j.waitFor(t, 1, ofType(event.TypeInputRequested)).Payload.(event.InputRequested)
	assert.Equal(t, "What's your name?", req.Prompt)
	assert.Equal(t, 300, req.TimeoutSeconds)
	assert.False(t, req.Secret)
	assert.Equal(t, "assistant", req.Agent)
	r.answer(t, event.Command{Kind: event.CommandInput, ID: req.RequestID, Text: "Ada"})
	evs := e.wait(r)
	checkIDs(t, evs)

	assert.Equal(t, concat(askThink("ask_user", `{"prompt":"What's your name?","timeout_seconds":300}`), []string{
		"node.entered act",
		"tool.exec.started ask_user",
		"input.requested",
		"input.provided",
		"tool.exec.completed ask_user",
		"node.exited act",
	}, answerThink("Hello, Ada!")), lines(evs))
	assert.Equal(t, event.InputProvided{RequestID: req.RequestID, Text: "Ada"}, only[event.InputProvided](t, evs))
}

// TestInputTimedOut waits for the scenario's one-second timeout to pass:
// the run's own clock ends the wait, the test only waits for the run.
func TestInputTimedOut(t *testing.T) {
	e := newEnv(t, "input")
	evs := e.run(e.agent(agent.Config{}), "ask nobody", true)
	checkIDs(t, evs)

	assert.Equal(t, concat(askThink("ask_user", `{"prompt":"Anyone?","timeout_seconds":1}`), []string{
		"node.entered act",
		"tool.exec.started ask_user",
		"input.requested",
		"input.timed_out",
		"tool.exec.completed ask_user error",
		"node.exited act",
	}, answerThink("No answer: ask_user: "+tools.ErrInputTimedOut.Error())), lines(evs))
	req := only[event.InputRequested](t, evs)
	assert.Equal(t, event.InputTimedOut{RequestID: req.RequestID, TimeoutSeconds: 1}, only[event.InputTimedOut](t, evs))
}

func TestInputWithoutAPerson(t *testing.T) {
	e := newEnv(t, "input")
	evs := e.run(e.agent(agent.Config{}), "ask my name", false)
	checkIDs(t, evs)
	assert.Empty(t, payloads[event.InputRequested](evs))
	res := only[event.ToolExecCompleted](t, evs)
	assert.True(t, res.IsError)
	assert.Equal(t, tools.ErrNoAsker.Error(), res.Result)
}

func TestUIRequest(t *testing.T) {
	e := newEnv(t, "input")
	r := e.start(e.agent(agent.Config{}), "show a form", true)
	req := r.j.waitFor(t, 1, ofType(event.TypeUIRequested)).Payload.(event.UIRequested)
	assert.Equal(t, "ui", req.Tool)
	assert.Equal(t, "form", req.Component)
	assert.JSONEq(t, `{"fields":["email"]}`, string(req.Payload))
	r.answer(t, event.Command{Kind: event.CommandUI, ID: req.RequestID, Data: json.RawMessage(`{"email":"ada@example.com"}`)})
	evs := e.wait(r)
	checkIDs(t, evs)

	assert.Equal(t, concat(askThink("ui", `{"component":"form","payload":{"fields":["email"]}}`), []string{
		"node.entered act",
		"tool.exec.started ui",
		"ui.requested",
		"ui.resolved",
		"tool.exec.completed ui",
		"node.exited act",
	}, answerThink(`The form returned {"email":"ada@example.com"}`)), lines(evs))
	require.JSONEq(t, `{"email":"ada@example.com"}`, string(only[event.UIResolved](t, evs).Data))
}

func TestCancelWhileWaitingForInput(t *testing.T) {
	e := newEnv(t, "input")
	r := e.start(e.agent(agent.Config{}), "ask my name", true)
	r.j.waitFor(t, 1, ofType(event.TypeInputRequested))
	r.cancel()
	evs := e.wait(r)
	checkIDs(t, evs)
	ls := lines(evs)
	assert.Equal(t, []string{"input.requested", "tool.exec.completed ask_user error", "node.exited act", "run.cancelled cancelled"}, ls[len(ls)-4:])
}

func TestCancelWhileWaitingForApproval(t *testing.T) {
	e := newEnv(t, "approval")
	r := e.start(e.agent(agent.Config{Policy: tools.PolicySuggest}), "touch a file", true)
	r.j.waitFor(t, 1, ofType(event.TypeToolApprovalRequested))
	r.cancel()
	evs := e.wait(r)
	checkIDs(t, evs)
	ls := lines(evs)
	assert.Equal(t, []string{"tool.approval.requested bash", "tool.exec.completed bash error", "node.exited act", "run.cancelled cancelled"}, ls[len(ls)-4:])
	assert.Empty(t, payloads[event.ToolApprovalResolved](evs))
	assert.False(t, exists(t, e.workdir, "touched.txt"))
}
