package agent_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/agent"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/llm"
	"github.com/agentwire/agentwire/internal/tools"
)

// touchThink is the first think node of "touch a file".
var touchThink = []string{
	"run.started react",
	"node.entered think",
	"message.started assistant", `message.delta "Creating it."`, "message.completed assistant",
	"tool.call.started bash", `tool.call.delta "{\"command\":\"touch touched.txt\"}"`, "tool.call.completed bash",
	"usage",
	"node.exited think",
}

// answerThink is a think node that streams text as one chunk and answers.
func answerThink(text string) []string {
	return []string{
		"node.entered think",
		"message.started assistant", "message.delta " + quote(text), "message.completed assistant",
		"usage",
		"node.exited think",
		"run.completed final_answer",
	}
}

func quote(s string) string { return strconv.Quote(s) }

func concat(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// approve waits for the n-th approval request of r and answers it.
func approve(t *testing.T, r *running, n int, d event.Decision, msg string) event.ToolApprovalRequested {
	t.Helper()
	req := r.j.waitFor(t, n, ofType(event.TypeToolApprovalRequested)).Payload.(event.ToolApprovalRequested)
	r.answer(t, event.Command{Kind: event.CommandApprove, ID: req.CallID, Decision: d, Text: msg})
	return req
}

func exists(t *testing.T, dir, name string) bool {
	t.Helper()
	_, err := os.Stat(filepath.Join(dir, name))
	return err == nil
}

func TestApprovalApprove(t *testing.T) {
	e := newEnv(t, "approval")
	r := e.start(e.agent(agent.Config{Policy: tools.PolicySuggest}), "touch a file", true)
	req := approve(t, r, 1, event.DecisionApprove, "")
	evs := e.wait(r)
	checkIDs(t, evs)

	assert.Equal(t, concat(touchThink, []string{
		"node.entered act",
		"tool.approval.requested bash",
		"tool.approval.resolved approve",
		"tool.exec.started bash",
		"tool.exec.completed bash",
		"node.exited act",
	}, answerThink("Done.")), lines(evs))
	assert.Equal(t, []string{"touch", "touched.txt"}, req.Command)
	assert.Equal(t, "touch", req.Key)
	assert.JSONEq(t, `{"command":"touch touched.txt"}`, string(req.Arguments))
	assert.Contains(t, req.Reason, "runs a command")
	assert.Equal(t, event.ToolApprovalResolved{CallID: req.CallID, Decision: event.DecisionApprove}, only[event.ToolApprovalResolved](t, evs))
	assert.True(t, exists(t, e.workdir, "touched.txt"))
}

func TestApprovalApproveOnceAsksAgain(t *testing.T) {
	e := newEnv(t, "approval")
	r := e.start(e.agent(agent.Config{Policy: tools.PolicySuggest}), "touch two files", true)
	approve(t, r, 1, event.DecisionApprove, "")
	approve(t, r, 2, event.DecisionApprove, "")
	evs := e.wait(r)
	checkIDs(t, evs)
	assert.Len(t, payloads[event.ToolApprovalRequested](evs), 2)
	assert.True(t, exists(t, e.workdir, "one.txt"))
	assert.True(t, exists(t, e.workdir, "two.txt"))
}

func TestApprovalApproveAlways(t *testing.T) {
	e := newEnv(t, "approval")
	cfg := agent.Config{Policy: tools.PolicySuggest}
	r := e.start(e.agent(cfg), "touch two files", true)
	approve(t, r, 1, event.DecisionApproveAlways, "")
	evs := e.wait(r)
	checkIDs(t, evs)

	// The second `touch` of the run runs without asking.
	assert.Equal(t, []string{
		"run.started react",
		"node.entered think",
		"tool.call.started bash", `tool.call.delta "{\"command\":\"touch one.txt\"}"`, "tool.call.completed bash",
		"usage",
		"node.exited think",
		"node.entered act",
		"tool.approval.requested bash",
		"tool.approval.resolved approve_always",
		"message.started system", `message.delta "Approved always: commands that run only touch now run without asking in this conversation."`, "message.completed system",
		"tool.exec.started bash", "tool.exec.completed bash",
		"node.exited act",
		"node.entered think",
		"tool.call.started bash", `tool.call.delta "{\"command\":\"touch two.txt\"}"`, "tool.call.completed bash",
		"usage",
		"node.exited think",
		"node.entered act",
		"tool.exec.started bash", "tool.exec.completed bash",
		"node.exited act",
		"node.entered think",
		"message.started assistant", `message.delta "Both exist."`, "message.completed assistant",
		"usage",
		"node.exited think",
		"run.completed final_answer",
	}, lines(evs))
	assert.True(t, exists(t, e.workdir, "two.txt"))

	// After a restart the thread still remembers: a new Agent over the
	// reopened store runs the next `touch` without asking.
	e.reopen()
	evs = e.run(e.agent(cfg), "touch another", true)
	checkIDs(t, evs)
	assert.Empty(t, payloads[event.ToolApprovalRequested](evs))
	assert.Equal(t, "Three exists.", only[event.RunCompleted](t, evs).Reply)
	assert.True(t, exists(t, e.workdir, "three.txt"))

	// Another thread does not share the memory.
	e.thread += "-other"
	r = e.start(e.agent(cfg), "touch another", true)
	approve(t, r, 1, event.DecisionDenyContinue, "")
	evs = e.wait(r)
	assert.Len(t, payloads[event.ToolApprovalRequested](evs), 1)
}

func TestApprovalDenyContinue(t *testing.T) {
	e := newEnv(t, "approval")
	r := e.start(e.agent(agent.Config{Policy: tools.PolicySuggest}), "touch a file", true)
	approve(t, r, 1, event.DecisionDenyContinue, "use write_file instead")
	evs := e.wait(r)
	checkIDs(t, evs)

	const told = "aborted\nThe user denied this call: use write_file instead"
	assert.Equal(t, concat(touchThink, []string{
		"node.entered act",
		"tool.approval.requested bash",
		"tool.approval.resolved deny_continue",
		"tool.exec.completed bash error",
		"node.exited act",
	}, answerThink("Not run: "+told)), lines(evs))
	assert.Equal(t, "use write_file instead", only[event.ToolApprovalResolved](t, evs).Message)
	assert.Equal(t, told, only[event.ToolExecCompleted](t, evs).Result)
	assert.False(t, exists(t, e.workdir, "touched.txt"))

	// The model sees the person's message as the call's result.
	reqs := e.model.requests()
	require.Len(t, reqs, 2)
	got := toolMessages(reqs[1])
	require.Len(t, got, 1)
	assert.Equal(t, llm.Message{Role: llm.RoleTool, ToolCallID: got[0].ToolCallID, Name: "bash", Content: told, IsError: true}, got[0])
}

func TestApprovalDenyStop(t *testing.T) {
	e := newEnv(t, "approval")
	r := e.start(e.agent(agent.Config{Policy: tools.PolicySuggest}), "touch a file", true)
	approve(t, r, 1, event.DecisionDenyStop, "")
	evs := e.wait(r)
	checkIDs(t, evs)

	assert.Equal(t, concat(touchThink, []string{
		"node.entered act",
		"tool.approval.requested bash",
		"tool.approval.resolved deny_stop",
		"tool.exec.completed bash error",
		"node.exited act",
		"run.cancelled denied",
	}), lines(evs))
	assert.Equal(t, "aborted\nThe user denied this call and stopped the run.", only[event.ToolExecCompleted](t, evs).Result)
	assert.Len(t, e.model.requests(), 1, "the model is not called again")
	assert.False(t, exists(t, e.workdir, "touched.txt"))
}

func TestApprovalExplain(t *testing.T) {
	e := newEnv(t, "approval")
	r := e.start(e.agent(agent.Config{Policy: tools.PolicySuggest, System: "Be careful."}), "touch a file", true)
	first := approve(t, r, 1, event.DecisionExplain, "")
	second := approve(t, r, 2, event.DecisionApprove, "")
	evs := e.wait(r)
	checkIDs(t, evs)

	assert.Equal(t, concat(touchThink, []string{
		"node.entered act",
		"tool.approval.requested bash",
		"tool.approval.resolved explain",
		"message.started assistant explanation",
		`message.delta "It creates an empty file."`,
		"message.completed assistant explanation",
		"usage",
		"tool.approval.requested bash",
		"tool.approval.resolved approve",
		"tool.exec.started bash",
		"tool.exec.completed bash",
		"node.exited act",
	}, answerThink("Done.")), lines(evs))
	assert.Equal(t, first, second, "the same request stands again")

	// The explanation call sees the conversation before the call and the
	// question, and is offered no tools; the next think call does not see
	// the explanation.
	reqs := e.model.requests()
	require.Len(t, reqs, 3)
	explain := reqs[1]
	assert.Empty(t, explain.Tools)
	assert.Equal(t, "Be careful.", explain.System)
	require.Len(t, explain.Messages, 2)
	assert.Equal(t, llm.Message{Role: llm.RoleUser, Content: "touch a file"}, explain.Messages[0])
	assert.Equal(t, llm.RoleUser, explain.Messages[1].Role)
	assert.Contains(t, explain.Messages[1].Content, "touch touched.txt")
	for _, m := range reqs[2].Messages {
		assert.NotContains(t, m.Content, "It creates an empty file.")
	}
}

func TestApprovalUnknownDecisionDenies(t *testing.T) {
	e := newEnv(t, "approval")
	r := e.start(e.agent(agent.Config{Policy: tools.PolicySuggest}), "touch a file", true)
	approve(t, r, 1, event.Decision("maybe"), "")
	evs := e.wait(r)
	assert.Equal(t, event.DecisionDenyContinue, only[event.ToolApprovalResolved](t, evs).Decision)
	assert.False(t, exists(t, e.workdir, "touched.txt"))
}

func TestApprovalNonInteractive(t *testing.T) {
	e := newEnv(t, "approval")
	evs := e.run(e.agent(agent.Config{Policy: tools.PolicySuggest}), "touch a file", false)
	checkIDs(t, evs)

	// The refusal is said once, in the call's result: no system message
	// repeats it.
	ms := payloads[event.MessageCompleted](evs)
	require.Len(t, ms, 2)
	why := only[event.ToolExecCompleted](t, evs).Result
	assert.Equal(t, concat(touchThink, []string{
		"node.entered act",
		"tool.exec.completed bash error",
		"node.exited act",
	}, answerThink("Not run: "+why)), lines(evs))
	assert.Contains(t, why, "`touch touched.txt` needs approval")
	assert.Contains(t, why, "--approval-policy")
	assert.False(t, exists(t, e.workdir, "touched.txt"))
}

// TestPolicies runs one turn of four calls — a read, an edit, a read-only
// command and another command — under each policy, with nobody to ask, and
// checks which calls ran, which would have asked, and which were refused.
func TestPolicies(t *testing.T) {
	const (
		ran     = "ran"
		asked   = "asked"
		refused = "refused"
	)
	for _, tc := range []struct {
		policy tools.Policy
		want   []string // read notes.txt, write_file, bash ls, bash touch
	}{
		{tools.PolicySuggest, []string{ran, asked, ran, asked}},
		{tools.PolicyAutoEdit, []string{ran, ran, ran, asked}},
		{tools.PolicyFullAuto, []string{ran, ran, ran, ran}},
		{tools.PolicyReadOnly, []string{ran, refused, refused, refused}},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			e := newEnv(t, "approval")
			evs := e.run(e.agent(agent.Config{Policy: tc.policy}), "every kind", false)
			checkIDs(t, evs)
			started := map[string]bool{}
			for _, s := range payloads[event.ToolExecStarted](evs) {
				started[s.CallID] = true
			}
			results := map[string]event.ToolExecCompleted{}
			for _, c := range payloads[event.ToolExecCompleted](evs) {
				results[c.CallID] = c
			}
			var got []string
			for _, c := range payloads[event.ToolCallCompleted](evs) {
				res := results[c.CallID]
				switch {
				case started[c.CallID]:
					got = append(got, ran)
					assert.False(t, res.IsError, "%s: %s", c.Name, res.Result)
				case strings.HasPrefix(res.Result, "Not run:") && strings.Contains(res.Result, "needs approval"):
					got = append(got, asked)
				case strings.HasPrefix(res.Result, "Refused:"):
					got = append(got, refused)
				default:
					t.Errorf("%s: unexpected result %q", c.Name, res.Result)
				}
			}
			assert.Equal(t, tc.want, got)
			system := 0
			for _, m := range payloads[event.MessageCompleted](evs) {
				if m.Role == event.RoleSystem {
					system++
				}
			}
			assert.Zero(t, system, "a refusal is said once, in the call's result, not again as a system message")
			assert.Equal(t, tc.want[1] == ran, exists(t, e.workdir, "new.txt"))
			assert.Equal(t, tc.want[3] == ran, exists(t, e.workdir, "made.txt"))
			assert.Equal(t, "Tried everything.", only[event.RunCompleted](t, evs).Reply)
		})
	}
}

// TestReadOnlyOffersNoWriters checks the read-only set up the way the
// server does it: the registry filtered by the policy offers the model only
// tools that cannot write or run anything.
func TestReadOnlyOffersNoWriters(t *testing.T) {
	e := newEnv(t, "approval")
	evs := e.run(e.agent(agent.Config{Policy: tools.PolicyReadOnly, Tools: e.tools.Filter(tools.PolicyReadOnly)}), "every kind", false)
	checkIDs(t, evs)

	reqs := e.model.requests()
	require.NotEmpty(t, reqs)
	var offered []string
	for _, s := range reqs[0].Tools {
		offered = append(offered, s.Name)
		tool, ok := e.tools.Get(s.Name)
		require.True(t, ok)
		assert.Equal(t, tools.EffectRead, tools.MaxEffect(tool), "%s is offered", s.Name)
	}
	assert.Contains(t, offered, "read")
	for _, w := range []string{"write_file", "edit", "multiedit", "apply_patch", "move_file", "delete_file", "create_dir", "bash", "batch"} {
		assert.NotContains(t, offered, w)
	}
	// A call to a tool that is not offered does not run.
	for _, res := range payloads[event.ToolExecCompleted](evs) {
		if res.Name != "read" {
			assert.True(t, res.IsError)
			assert.Contains(t, res.Result, "There is no tool named")
		}
	}
	assert.False(t, exists(t, e.workdir, "new.txt"))
	assert.False(t, exists(t, e.workdir, "made.txt"))
}

// TestApproveAlwaysRemembersACompoundLine: a line of several programs
// approved always is remembered as that exact line: the next turn's same
// line runs without asking, another line still asks, and the request
// carried the line as its key.
func TestApproveAlwaysRemembersACompoundLine(t *testing.T) {
	e := newEnv(t, "approval")
	cfg := agent.Config{Policy: tools.PolicySuggest}
	r := e.start(e.agent(cfg), "raise the flag", true)
	req := approve(t, r, 1, event.DecisionApproveAlways, "")
	assert.Equal(t, tools.LineKey("touch flag.txt && echo raised"), req.Key)
	said := e.wait(r)
	var notices []string
	for _, m := range payloads[event.MessageCompleted](said) {
		if m.Role == event.RoleSystem {
			notices = append(notices, m.Text)
		}
	}
	assert.Equal(t, []string{"Approved always: this exact command line now runs without asking in this conversation: touch flag.txt && echo raised"}, notices,
		"the answer's notice says that the exact line is remembered")
	require.True(t, exists(t, e.workdir, "flag.txt"))
	require.NoError(t, os.Remove(filepath.Join(e.workdir, "flag.txt")))

	evs := e.run(e.agent(cfg), "raise the flag again", true)
	assert.Empty(t, payloads[event.ToolApprovalRequested](evs), "the remembered line asked again")
	assert.True(t, exists(t, e.workdir, "flag.txt"), "the remembered line did not run")

	r = e.start(e.agent(cfg), "lower the flag", true)
	other := approve(t, r, 1, event.DecisionDenyContinue, "")
	assert.Equal(t, tools.LineKey("rm flag.txt && echo lowered"), other.Key, "another line asks")
	e.wait(r)
	assert.True(t, exists(t, e.workdir, "flag.txt"))
}
