package agent_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/agent"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/llm"
	"github.com/agentwire/agentwire/internal/tools"
	"github.com/agentwire/agentwire/internal/tools/builtin"
	"github.com/agentwire/agentwire/internal/tools/sandbox"
)

func TestTextAnswer(t *testing.T) {
	e := newEnv(t, "text")
	evs := e.run(e.agent(agent.Config{Name: "helper"}), "say hello", false)

	checkIDs(t, evs)
	assert.Equal(t, []string{
		"run.started react",
		"node.entered think",
		"message.started assistant",
		`message.delta "Hello"`,
		`message.delta " ther"`,
		`message.delta "e."`,
		"message.completed assistant",
		"usage",
		"node.exited think",
		"run.completed final_answer",
	}, lines(evs))

	started := only[event.RunStarted](t, evs)
	assert.Equal(t, event.RunStarted{Strategy: "react", Agent: "helper", Input: "say hello"}, started)
	msg := only[event.MessageCompleted](t, evs)
	assert.Equal(t, "Hello there.", msg.Text)
	assert.Equal(t, "helper", msg.Agent)
	assert.Equal(t, event.Usage{PromptTokens: 11, CompletionTokens: 3, TotalTokens: 14, Model: "scripted:text"}, only[event.Usage](t, evs))
	assert.Equal(t, event.RunCompleted{Reason: "final_answer", Reply: "Hello there."}, only[event.RunCompleted](t, evs))

	reqs := e.model.requests()
	require.Len(t, reqs, 1)
	assert.Equal(t, []llm.Message{{Role: llm.RoleUser, Content: "say hello"}}, reqs[0].Messages)
}

func TestToolTurn(t *testing.T) {
	e := newEnv(t, "tools")
	evs := e.run(e.agent(agent.Config{}), "read the notes", false)

	checkIDs(t, evs)
	assert.Equal(t, []string{
		"run.started react",
		"node.entered think",
		"message.started assistant",
		`message.delta "Reading."`,
		"message.completed assistant",
		"tool.call.started read",
		`tool.call.delta "{\"path\":\"n"`,
		`tool.call.delta "otes.txt\"}"`,
		"tool.call.completed read",
		"usage",
		"node.exited think",
		"node.entered act",
		"tool.exec.started read",
		"tool.exec.completed read",
		"node.exited act",
		"node.entered think",
		"message.started assistant",
		`message.delta "The notes say: ` + notes + `"`,
		"message.completed assistant",
		"usage",
		"node.exited think",
		"run.completed final_answer",
	}, lines(evs))

	call := only[event.ToolCallCompleted](t, evs)
	assert.JSONEq(t, `{"path":"notes.txt"}`, string(call.Arguments))
	res := only[event.ToolExecCompleted](t, evs)
	assert.False(t, res.IsError)
	assert.Contains(t, res.Result, notes)
	assert.Equal(t, "The notes say: "+res.Result, only[event.RunCompleted](t, evs).Reply)

	// The second model call sees the first turn and the tool's result.
	reqs := e.model.requests()
	require.Len(t, reqs, 2)
	assert.Equal(t, []llm.Message{
		{Role: llm.RoleUser, Content: "read the notes"},
		{Role: llm.RoleAssistant, Content: "Reading.", ToolCalls: []llm.ToolCall{{ID: call.CallID, Name: "read", Arguments: string(call.Arguments)}}},
		{Role: llm.RoleTool, ToolCallID: call.CallID, Name: "read", Content: res.Result},
	}, reqs[1].Messages)
	// Every call offers the tools, in name order.
	for _, req := range reqs {
		var names []string
		for _, s := range req.Tools {
			names = append(names, s.Name)
		}
		assert.Equal(t, e.tools.Names(), names)
	}
}

func TestUsageIsSummedPerRun(t *testing.T) {
	e := newEnv(t, "tools")
	evs := e.run(e.agent(agent.Config{}), "read the notes", false)
	var sum event.Usage
	for _, u := range payloads[event.Usage](evs) {
		sum.PromptTokens += u.PromptTokens
		sum.CompletionTokens += u.CompletionTokens
		sum.TotalTokens += u.TotalTokens
	}
	assert.Equal(t, event.Usage{PromptTokens: 250, CompletionTokens: 32, TotalTokens: 282}, sum)
}

func TestReadsRunConcurrently(t *testing.T) {
	e := newEnv(t, "tools")
	evs := e.run(e.agent(agent.Config{}), "look around", false)
	checkIDs(t, evs)

	// The three reads run at once, so their exec events interleave in any
	// order; each starts before it completes, and all fall inside act.
	ls := lines(evs)
	act := ls[indexOf(t, ls, "node.entered act")+1 : indexOf(t, ls, "node.exited act")]
	assert.ElementsMatch(t, []string{
		"tool.exec.started ls", "tool.exec.completed ls",
		"tool.exec.started read", "tool.exec.completed read",
		"tool.exec.started glob", "tool.exec.completed glob",
	}, act)
	for _, name := range []string{"ls", "read", "glob"} {
		assert.Less(t, indexOf(t, act, "tool.exec.started "+name), indexOf(t, act, "tool.exec.completed "+name))
	}

	// The model gets the results in the order it made the calls.
	calls := payloads[event.ToolCallCompleted](evs)
	reqs := e.model.requests()
	require.Len(t, reqs, 2)
	got := toolMessages(reqs[1])
	require.Len(t, got, 3)
	for i, c := range calls {
		assert.Equal(t, c.CallID, got[i].ToolCallID)
		assert.False(t, got[i].IsError, "%s: %s", c.Name, got[i].Content)
	}
	assert.Contains(t, got[0].Content, "notes.txt")
	assert.Contains(t, got[1].Content, notes)
}

// TestReadsRunConcurrentlyProof shows the reads of one turn truly run at
// once: two ask_user calls (which only read) both wait for their answer
// together, and are answered in reverse order.
func TestReadsRunConcurrentlyProof(t *testing.T) {
	e := newEnv(t, "tools")
	r := e.start(e.agent(agent.Config{}), "two questions", true)
	// Both questions are pending at once; which was asked first is up to
	// the scheduler.
	asked := map[string]string{} // prompt -> request id
	for n := 1; n <= 2; n++ {
		p := r.j.waitFor(t, n, ofType(event.TypeInputRequested)).Payload.(event.InputRequested)
		asked[p.Prompt] = p.RequestID
	}
	require.Len(t, asked, 2)
	r.answer(t, event.Command{Kind: event.CommandInput, ID: asked["Second?"], Text: "two"})
	r.answer(t, event.Command{Kind: event.CommandInput, ID: asked["First?"], Text: "one"})
	evs := e.wait(r)
	checkIDs(t, evs)
	assert.Equal(t, "two", only[event.RunCompleted](t, evs).Reply, "the latest ask_user result is the second call's")
	got := toolMessages(e.model.requests()[1])
	require.Len(t, got, 2)
	assert.Equal(t, []string{"one", "two"}, []string{got[0].Content, got[1].Content})
}

func TestEditsRunInOrder(t *testing.T) {
	e := newEnv(t, "tools")
	evs := e.run(e.agent(agent.Config{Policy: tools.PolicyAutoEdit}), "write two files", false)
	checkIDs(t, evs)
	assert.Equal(t, []string{
		"run.started react",
		"node.entered think",
		"tool.call.started write_file", `tool.call.delta "{\"path\":\"a.txt\",\"content\":\"first\\n\"}"`, "tool.call.completed write_file",
		"tool.call.started write_file", `tool.call.delta "{\"path\":\"a.txt\",\"content\":\"second\\n\"}"`, "tool.call.completed write_file",
		"usage",
		"node.exited think",
		"node.entered act",
		"tool.exec.started write_file", "tool.exec.completed write_file",
		"tool.exec.started write_file", "tool.exec.completed write_file",
		"node.exited act",
		"node.entered think",
		"message.started assistant", `message.delta "Wrote."`, "message.completed assistant",
		"usage",
		"node.exited think",
		"run.completed final_answer",
	}, lines(evs))
	results := payloads[event.ToolExecCompleted](evs)
	assert.Equal(t, []string{"Created a.txt (6 bytes)", "Replaced a.txt (7 bytes)"}, []string{results[0].Result, results[1].Result})
	b, err := os.ReadFile(filepath.Join(e.workdir, "a.txt"))
	require.NoError(t, err)
	assert.Equal(t, "second\n", string(b))
}

func TestStepLimit(t *testing.T) {
	e := newEnv(t, "tools")
	evs := e.run(e.agent(agent.Config{MaxSteps: 3}), "never stop", false)
	checkIDs(t, evs)
	assert.Len(t, e.model.requests(), 3, "model calls")
	assert.Len(t, payloads[event.NodeEntered](evs), 6, "three thinks and three acts")
	failed := only[event.RunFailed](t, evs)
	assert.Equal(t, event.CodeStepLimit, failed.Code)
	assert.Contains(t, failed.Message, "3 model calls")
	ls := lines(evs)
	assert.Equal(t, []string{"node.exited act", "run.failed step_limit"}, ls[len(ls)-2:])
}

func TestStepLimitDefaultIsTen(t *testing.T) {
	e := newEnv(t, "tools")
	// Four calls and an answer fit in the default limit.
	evs := e.run(e.agent(agent.Config{}), "never stop", false)
	assert.Equal(t, "Finally.", only[event.RunCompleted](t, evs).Reply)
	assert.Len(t, e.model.requests(), 5)
}

func TestModelErrorMidStream(t *testing.T) {
	e := newEnv(t, "failures")
	evs := e.run(e.agent(agent.Config{}), "fail midway", false)
	checkIDs(t, evs)
	assert.Equal(t, []string{
		"run.started react",
		"node.entered think",
		"message.started assistant",
		`message.delta "This starts well and"`,
		"message.completed assistant",
		"node.exited think error",
		"run.failed model_error",
	}, lines(evs))
	assert.Equal(t, "This starts well and", only[event.MessageCompleted](t, evs).Text, "the partial message is completed")
	failed := only[event.RunFailed](t, evs)
	assert.Contains(t, failed.Message, "upstream exploded")
	assert.Contains(t, only[event.NodeExited](t, evs).Error, "upstream exploded")
}

func TestCancelMidStream(t *testing.T) {
	e := newEnv(t, "failures")
	// The scenario's pacing, not the env's instant one: the second word
	// comes thirty seconds after the first.
	a := e.agent(agent.Config{Model: &recorder{Model: scriptedModel(t, "failures")}})
	r := e.start(a, "slow answer", false)
	r.j.waitFor(t, 1, ofType(event.TypeMessageDelta))
	r.cancel()
	evs := e.wait(r)
	checkIDs(t, evs)
	assert.Equal(t, []string{
		"run.started react",
		"node.entered think",
		"message.started assistant",
		`message.delta "One "`,
		"message.completed assistant",
		"node.exited think error",
		"run.cancelled cancelled",
	}, lines(evs))
	assert.Equal(t, "One ", only[event.MessageCompleted](t, evs).Text)
}

// TestRunThatIsNoLongerItsThreadsRecordsNothingMore cancels a run
// mid-stream with each cause that says its events are no longer its
// thread's: another server took the thread over (ErrSuperseded), or its
// start ahead of its commit was undone (ErrUndone). Either way it records
// nothing more, not even the end of the message it was streaming; and the
// two causes are told apart.
func TestRunThatIsNoLongerItsThreadsRecordsNothingMore(t *testing.T) {
	assert.False(t, errors.Is(agent.ErrUndone, agent.ErrSuperseded), "an undone start is not a takeover")
	assert.False(t, errors.Is(agent.ErrSuperseded, agent.ErrUndone), "a takeover is not an undone start")
	for name, cause := range map[string]error{"superseded": agent.ErrSuperseded, "undone": agent.ErrUndone} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, "failures")
			// The scenario's pacing: the second word comes thirty seconds
			// after the first.
			a := e.agent(agent.Config{Model: &recorder{Model: scriptedModel(t, "failures")}})
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			spec := agent.Spec{Thread: e.thread, Run: event.NewID(), Input: "slow answer"}
			_, err := e.store.Append(ctx, e.thread, event.New(e.thread, spec.Run, event.MessageUser{MessageID: event.NewID(), Text: spec.Input}))
			require.NoError(t, err)
			j := newJournal(e.store, e.thread)
			done := make(chan error, 1)
			go func() { done <- a.Run(ctx, spec, j, agent.NewInbox()) }()
			j.waitFor(t, 1, ofType(event.TypeMessageDelta))
			cancel(cause)
			select {
			case err := <-done:
				require.NoError(t, err, "Run")
			case <-time.After(testTimeout):
				t.Fatalf("the run did not end within %s", testTimeout)
			}
			assert.Equal(t, []string{
				"run.started react",
				"node.entered think",
				"message.started assistant",
				`message.delta "One "`,
			}, lines(e.runEvents(spec.Run)))
		})
	}
}

func TestCancelMidTool(t *testing.T) {
	e := newEnv(t, "failures")
	// Unconfined, so that the pid the command prints is the machine's
	// (the sandbox's commands have pids of their own namespace; its tests
	// check that a cancel kills them).
	root, err := sandbox.Open(e.workdir)
	require.NoError(t, err)
	defer root.Close()
	unconfined := builtin.New(root, builtin.Options{Sandbox: sandbox.Off()})
	r := e.start(e.agent(agent.Config{Policy: tools.PolicyFullAuto, Tools: unconfined}), "sleep long", false)
	// The command prints its pid, then becomes `sleep 30` in the same process.
	out := r.j.waitFor(t, 1, ofType(event.TypeToolExecOutput)).Payload.(event.ToolExecOutput)
	pid := parsePID(t, out.Text)
	require.True(t, alive(pid), "the command runs")
	r.cancel()
	evs := e.wait(r)
	checkIDs(t, evs)
	assert.False(t, alive(pid), "the command was killed")
	assert.Equal(t, []string{
		"run.started react",
		"node.entered think",
		"tool.call.started bash", `tool.call.delta "{\"command\":\"echo $$; exec sleep 30\"}"`, "tool.call.completed bash",
		"usage",
		"node.exited think",
		"node.entered act",
		"tool.exec.started bash",
		"tool.exec.output bash",
		"tool.exec.completed bash error",
		"node.exited act",
		"run.cancelled cancelled",
	}, lines(evs))
	assert.Equal(t, "Cancelled.", only[event.ToolExecCompleted](t, evs).Result)
}

func TestRestartBetweenTurns(t *testing.T) {
	e := newEnv(t, "tools")
	first := e.run(e.agent(agent.Config{}), "read the notes", false)
	require.Equal(t, event.TypeRunCompleted, first[len(first)-1].Type())
	call := only[event.ToolCallCompleted](t, first)
	res := only[event.ToolExecCompleted](t, first)

	e.reopen()
	second := e.run(e.agent(agent.Config{}), "look around", false)
	checkIDs(t, second)
	reqs := e.model.requests()
	require.NotEmpty(t, reqs)
	assert.Equal(t, []llm.Message{
		{Role: llm.RoleUser, Content: "read the notes"},
		{Role: llm.RoleAssistant, Content: "Reading.", ToolCalls: []llm.ToolCall{{ID: call.CallID, Name: "read", Arguments: string(call.Arguments)}}},
		{Role: llm.RoleTool, ToolCallID: call.CallID, Name: "read", Content: res.Result},
		{Role: llm.RoleAssistant, Content: "The notes say: " + res.Result},
		{Role: llm.RoleUser, Content: "look around"},
	}, reqs[0].Messages)
}

func TestUnknownToolAndBadArguments(t *testing.T) {
	e := newEnv(t, "tools")
	evs := e.run(e.agent(agent.Config{Tools: e.tools.Filter(tools.PolicyReadOnly)}), "write two files", false)
	checkIDs(t, evs)
	for _, res := range payloads[event.ToolExecCompleted](evs) {
		assert.True(t, res.IsError)
		assert.Equal(t, `There is no tool named "write_file".`, res.Result)
	}
	assert.Empty(t, payloads[event.ToolExecStarted](evs), "nothing ran")
}

func indexOf(t *testing.T, ls []string, s string) int {
	t.Helper()
	for i, l := range ls {
		if l == s {
			return i
		}
	}
	t.Fatalf("%q not in %q", s, ls)
	return -1
}

// parsePID reads the pid a command printed.
func parsePID(t *testing.T, s string) int {
	t.Helper()
	var pid int
	_, err := fmt.Sscan(strings.TrimSpace(s), &pid)
	require.NoError(t, err, "pid in %q", s)
	return pid
}

// alive reports whether process pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses: "pid (comm) S ...".
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z' && s[i+2] != 'X'
}
