package agent_test

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/agent"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/leaktest"
	"github.com/agentwire/agentwire/internal/llm"
	"github.com/agentwire/agentwire/internal/llm/scripted"
	"github.com/agentwire/agentwire/internal/tools"
)

// startWith commits the user's message and starts a run of a on it with
// the given strategy.
func (e *env) startWith(a *agent.Agent, strategy, text string) *running {
	e.t.Helper()
	return e.startSpec(a, agent.Spec{Input: text, Strategy: strategy})
}

// startSpec starts a run of a with spec, on its Input.
func (e *env) startSpec(a *agent.Agent, spec agent.Spec) *running {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	e.t.Cleanup(cancel)
	spec.Thread, spec.Run = e.thread, event.NewID()
	text := spec.Input
	j := newJournal(e.store, e.thread)
	_, err := e.store.Append(ctx, e.thread, event.New(e.thread, spec.Run, event.MessageUser{MessageID: event.NewID(), Text: text}))
	require.NoError(e.t, err)
	r := &running{j: j, inbox: agent.NewInbox(), cancel: cancel, done: make(chan error, 1), spec: spec}
	go func() { r.done <- a.Run(ctx, spec, j, r.inbox) }()
	return r
}

// runWith runs a to its end with strategy on text.
func (e *env) runWith(a *agent.Agent, strategy, text string) []event.Event {
	e.t.Helper()
	evs := e.wait(e.startWith(a, strategy, text))
	checkIDs(e.t, evs)
	return evs
}

// outline describes evs as lines does, without the deltas (how text is cut
// into fragments is the scenario's business) and with the fields of the
// strategies' events.
func outline(evs []event.Event) []string {
	var out []string
	for _, e := range evs {
		switch p := e.Payload.(type) {
		case event.MessageDelta, event.ToolCallDelta, event.ReasoningDelta, event.ToolExecOutput:
			continue
		case event.Usage:
			out = append(out, strings.TrimSpace("usage "+p.Purpose))
		case event.TotExpanded:
			out = append(out, fmt.Sprintf("tot.expanded %d %q", p.Depth, p.Candidates))
		case event.TotEvaluated:
			out = append(out, fmt.Sprintf("tot.evaluated %d %v", p.Chosen, p.Scores))
		case event.TotBacktracked:
			out = append(out, fmt.Sprintf("tot.backtracked %d %d", p.ToDepth, p.Candidate))
		case event.GotPlanned:
			out = append(out, fmt.Sprintf("got.planned %v %d", p.NodeIDs, p.EdgeCount))
		case event.GotNodeStarted:
			out = append(out, "got.node.started "+p.NodeID)
		case event.GotNodeCompleted:
			out = append(out, "got.node.completed "+p.NodeID)
		case event.GotNodeFailed:
			s := "got.node.failed " + p.NodeID
			if p.Skipped {
				s += " skipped"
			}
			out = append(out, s)
		case event.GotExpanded:
			out = append(out, fmt.Sprintf("got.expanded %s %v %d", p.NodeID, p.NodeIDs, p.EdgesAdded))
		default:
			out = append(out, line(e))
		}
	}
	return out
}

// think is the outline of a model call that answers with text.
func think(node, purpose string) []string {
	role := strings.TrimSpace("assistant " + purpose)
	return []string{"node.entered " + node, "message.started " + role, "message.completed " + role,
		strings.TrimSpace("usage " + purpose), "node.exited " + node}
}

// call is the outline of a model call that calls tool (with no text) and
// of the round of tools that follows.
func call(tool string, failed bool) []string {
	res := "tool.exec.completed " + tool
	if failed {
		res += " error"
	}
	return []string{"node.entered think", "tool.call.started " + tool, "tool.call.completed " + tool, "usage", "node.exited think",
		"node.entered act", "tool.exec.started " + tool, res, "node.exited act"}
}

func seq(parts ...[]string) []string { return slices.Concat(parts...) }

func TestStrategiesAreListed(t *testing.T) {
	assert.Equal(t, []string{"dup", "got", "got_adaptive", "group", "react", "tot"}, agent.Strategies())
}

func TestDupUnderstandsPlansAndActs(t *testing.T) {
	leaktest.Check(t, "agentwire/agentwire/internal")
	e := newEnv(t, "strategies")
	evs := e.runWith(e.agent(agent.Config{System: "You are a test."}), "dup", "dup notes please")

	assert.Equal(t, seq(
		[]string{"run.started dup"},
		think("understand", "strategy"),
		think("plan", "strategy"),
		[]string{"node.entered think", "message.started assistant", "message.completed assistant",
			"tool.call.started read", "tool.call.completed read", "usage", "node.exited think",
			"node.entered act", "tool.exec.started read", "tool.exec.completed read", "node.exited act",
			"node.entered observe", "node.exited observe"},
		think("think", ""),
		[]string{"run.completed final_answer"},
	), outline(evs))
	assert.Equal(t, "The notes say: "+notes, only[event.RunCompleted](t, evs).Reply)

	reqs := e.model.requests()
	require.Len(t, reqs, 4)
	assert.True(t, strings.HasPrefix(reqs[0].System, "You are a test.\n\nStrategy step: understand."), reqs[0].System)
	assert.Empty(t, reqs[0].Tools, "the understand step offers no tools")
	assert.Contains(t, reqs[1].System, "Core goal: Tell the user what notes.txt says\nKey constraints:\n- only read, change nothing\n")
	assert.Contains(t, reqs[2].System, "1. Read notes.txt with read.", "the act phase has the plan")
	assert.Contains(t, reqs[2].System, "Core goal: Tell the user what notes.txt says")
	assert.NotEmpty(t, reqs[2].Tools)

	// The strategy's own messages are shown, not part of the model's
	// later history.
	hist, err := e.store.History(t.Context(), e.thread)
	require.NoError(t, err)
	tr := agent.Transcript(hist)
	require.Len(t, tr, 4, "user, call, result, answer: %+v", tr)
	assert.Equal(t, "Reading notes.txt.", tr[1].Content)
}

func TestDupRetriesAnUnusableUnderstandingOnce(t *testing.T) {
	leaktest.Check(t, "agentwire/agentwire/internal")
	e := newEnv(t, "strategies")
	evs := e.runWith(e.agent(agent.Config{}), "dup", "dup retried")
	out := outline(evs)
	assert.Equal(t, []string{"node.entered understand", "message.started assistant strategy", "message.completed assistant strategy",
		"usage strategy", "node.exited understand error"}, out[1:6])
	assert.Equal(t, "core_goal is missing or empty", payloads[event.NodeExited](evs)[0].Error)
	assert.Equal(t, think("understand", "strategy"), out[6:11])
	assert.Equal(t, "Hello!", only[event.RunCompleted](t, evs).Reply)

	reqs := e.model.requests()
	retry := reqs[1].Messages
	require.Len(t, retry, 3)
	assert.Equal(t, llm.RoleAssistant, retry[1].Role, "the bad answer")
	assert.Contains(t, retry[1].Content, `"core_goal": ""`)
	assert.Equal(t, llm.RoleUser, retry[2].Role)
	assert.Contains(t, retry[2].Content, "Your answer could not be used: core_goal is missing or empty")
	assert.Equal(t, []llm.Message{{Role: llm.RoleUser, Content: "dup retried"}}, reqs[2].Messages, "the retry is not part of the conversation")
}

// Two answers that cannot be used do not end the run: the model's own
// words stand for the understanding, and a system message says so.
func TestDupFallsBackAfterTwoUnusableAnswers(t *testing.T) {
	leaktest.Check(t, "agentwire/agentwire/internal")
	e := newEnv(t, "strategies")
	evs := e.runWith(e.agent(agent.Config{}), "dup", "dup never")
	bad := []string{"node.entered understand", "message.started assistant strategy", "message.completed assistant strategy", "usage strategy", "node.exited understand error"}
	assert.Equal(t, seq(
		[]string{"run.started dup"}, bad, bad,
		[]string{"message.started system", "message.completed system"},
		think("plan", "strategy"),
		think("think", ""),
		[]string{"run.completed final_answer"},
	), outline(evs))
	assert.Equal(t, "The model's answer to the understand step could not be used, even after a retry (the answer holds no JSON object), so its own words stand for the understanding.",
		systemNotes(evs)[0])
	assert.Equal(t, "Understood anyway.", only[event.RunCompleted](t, evs).Reply)
	reqs := e.model.requests()
	require.Len(t, reqs, 4)
	assert.Contains(t, reqs[2].System, "Core goal: I would rather not answer in JSON.", "the first answer stands for the understanding")
	assert.Contains(t, reqs[3].System, "Core goal: I would rather not answer in JSON.")

	hist, err := e.store.History(t.Context(), e.thread)
	require.NoError(t, err)
	assert.Equal(t, []llm.Message{{Role: llm.RoleUser, Content: "dup never"}, {Role: llm.RoleAssistant, Content: "Understood anyway."}},
		agent.Transcript(hist), "the note is not part of the model's history")
}

// systemNotes returns the texts of the system messages among evs.
func systemNotes(evs []event.Event) []string {
	var out []string
	for _, p := range payloads[event.MessageCompleted](evs) {
		if p.Role == event.RoleSystem {
			out = append(out, p.Text)
		}
	}
	return out
}

func TestTotBacktracksToTheNextCandidate(t *testing.T) {
	leaktest.Check(t, "agentwire/agentwire/internal")
	e := newEnv(t, "strategies")
	evs := e.runWith(e.agent(agent.Config{}), "tot", "tot notes")
	assert.Equal(t, seq(
		[]string{"run.started tot"},
		think("expand", "strategy"),
		[]string{`tot.expanded 1 ["Read missing.txt with read" "Read notes.txt with read" "Answer without reading anything"]`},
		think("evaluate", "strategy"),
		[]string{"tot.evaluated 0 [0.9 0.7 0.1]"},
		call("read", true),
		[]string{"tot.backtracked 1 1"},
		call("read", false),
		think("expand", "strategy"),
		[]string{`tot.expanded 2 ["Answer with what notes.txt says"]`},
		think("evaluate", "strategy"),
		[]string{"tot.evaluated 0 [0.95]"},
		think("think", ""),
		[]string{"run.completed final_answer"},
	), outline(evs))
	assert.Equal(t, "The notes say: "+notes, only[event.RunCompleted](t, evs).Reply)
	bt := only[event.TotBacktracked](t, evs)
	assert.Contains(t, bt.Reason, "its tool calls failed")

	reqs := e.model.requests()
	require.Len(t, reqs, 7)
	assert.Contains(t, reqs[3].System, "Take this next step now: Read notes.txt with read")
	assert.Contains(t, reqs[3].System, `"Read missing.txt with read" failed: its tool calls failed`, "the next candidate knows what failed")
	assert.Len(t, reqs[3].Messages, 1, "the dead end is not in the transcript of the next candidate")
	assert.Len(t, reqs[4].Messages, 3, "the next depth builds on the candidate that worked")
}

func TestTotFailsWhenEveryCandidateFails(t *testing.T) {
	leaktest.Check(t, "agentwire/agentwire/internal")
	e := newEnv(t, "strategies")
	evs := e.runWith(e.agent(agent.Config{}), "tot", "tot hopeless")
	assert.Equal(t, seq(
		[]string{"run.started tot"},
		think("expand", "strategy"),
		[]string{`tot.expanded 1 ["Read missing.txt" "Read gone.txt"]`},
		think("evaluate", "strategy"),
		[]string{"tot.evaluated 1 [0.5 0.6]"},
		call("read", true),
		[]string{"tot.backtracked 1 0"},
		call("read", true),
		[]string{"run.failed tool_error"},
	), outline(evs))
	assert.Contains(t, only[event.RunFailed](t, evs).Message, "every candidate thought failed")
}

func TestTotScoresOutOfRangeFallBackToTheOrderProposed(t *testing.T) {
	leaktest.Check(t, "agentwire/agentwire/internal")
	e := newEnv(t, "strategies")
	evs := e.runWith(e.agent(agent.Config{}), "tot", "tot scores")
	out := outline(evs)
	assert.Equal(t, []string{"node.exited evaluate error", "node.entered evaluate"}, out[11:13])
	exits := payloads[event.NodeExited](evs)
	assert.Equal(t, "score 1 is 1.5, out of the range 0 to 1", exits[1].Error)
	assert.Equal(t, "score 1 is 7, out of the range 0 to 1", exits[2].Error)
	assert.Equal(t, []string{"The model's answer to the evaluate step could not be used, even after a retry (score 1 is 7, out of the range 0 to 1), so the candidates are tried in the order they were proposed."},
		systemNotes(evs))
	assert.Equal(t, event.TotEvaluated{Chosen: 0, Scores: []float64{0.5, 0.5}}, only[event.TotEvaluated](t, evs))
	assert.Equal(t, "Answered first, as proposed.", only[event.RunCompleted](t, evs).Reply)
}

func TestTotConcludesAtItsDepth(t *testing.T) {
	leaktest.Check(t, "agentwire/agentwire/internal")
	e := newEnv(t, "strategies")
	evs := e.runWith(e.agent(agent.Config{TotDepth: 2, TotBranches: 2}), "tot", "tot deep")
	level := seq(think("expand", "strategy"), []string{`tot.expanded %d ["List the folder"]`}, think("evaluate", "strategy"),
		[]string{"tot.evaluated 0 [0.5]"}, call("ls", false))
	l1, l2 := slices.Clone(level), slices.Clone(level)
	l1[5], l2[5] = fmt.Sprintf(l1[5], 1), fmt.Sprintf(l2[5], 2)
	assert.Equal(t, seq([]string{"run.started tot"}, l1, l2, think("think", ""), []string{"run.completed final_answer"}), outline(evs))
	assert.Equal(t, "I have looked enough.", only[event.RunCompleted](t, evs).Reply)
	reqs := e.model.requests()
	assert.Contains(t, reqs[0].System, "Propose up to 2 different candidate")
	assert.Empty(t, reqs[len(reqs)-1].Tools, "the conclusion offers no tools")
}

// spans checks that the events of each got node, from got.node.started
// to its end, are not interleaved with another's, and returns the nodes
// in the order they started.
func spans(t *testing.T, evs []event.Event) []string {
	t.Helper()
	var order []string
	open := ""
	for i, e := range evs {
		switch p := e.Payload.(type) {
		case event.GotNodeStarted:
			require.Empty(t, open, "event %d: node %s starts inside node %s", i, p.NodeID, open)
			open = p.NodeID
			order = append(order, p.NodeID)
		case event.GotNodeCompleted:
			if open != "" {
				require.Equal(t, open, p.NodeID, "event %d", i)
				open = ""
			}
		case event.GotNodeFailed:
			if !p.Skipped {
				require.Equal(t, open, p.NodeID, "event %d", i)
				open = ""
			}
		case event.GotExpanded:
			require.Equal(t, open, p.NodeID, "event %d", i)
			open = ""
		case event.RunCompleted, event.RunFailed, event.RunCancelled, event.GotPlanned:
			require.Empty(t, open, "event %d", i)
		}
	}
	return order
}

// nodeEvents returns the outline of node's span.
func nodeEvents(evs []event.Event, node string) []string {
	var out []event.Event
	in := false
	for _, e := range evs {
		switch p := e.Payload.(type) {
		case event.GotNodeStarted:
			in = p.NodeID == node
		}
		if in {
			out = append(out, e)
		}
		switch p := e.Payload.(type) {
		case event.GotNodeCompleted:
			if p.NodeID == node {
				in = false
			}
		case event.GotNodeFailed:
			if p.NodeID == node {
				in = false
			}
		case event.GotExpanded:
			if p.NodeID == node {
				in = false
			}
		}
	}
	return outline(out)
}

func TestGotRunsThePlannedGraph(t *testing.T) {
	leaktest.Check(t, "agentwire/agentwire/internal")
	e := newEnv(t, "strategies")
	evs := e.runWith(e.agent(agent.Config{}), "got", "got notes")
	out := outline(evs)
	assert.Equal(t, seq([]string{"run.started got"}, think("plan", "strategy"), []string{"got.planned [list read report] 2"}), out[:7])
	assert.Equal(t, seq(think("synthesize", ""), []string{"run.completed final_answer"}), out[len(out)-6:])
	plan := only[event.GotPlanned](t, evs)
	assert.Equal(t, [][2]string{{"list", "report"}, {"read", "report"}}, plan.Edges)
	assert.Equal(t, []string{"List the working folder", "Read notes.txt", "Report on the folder and the notes"}, plan.Tasks)

	order := spans(t, evs)
	assert.ElementsMatch(t, []string{"list", "read"}, order[:2])
	assert.Equal(t, "report", order[2], "report waits for both")
	assert.Equal(t, seq([]string{"got.node.started read"}, call("read", false), think("think", ""), []string{"got.node.completed read"}), nodeEvents(evs, "read"))
	assert.Equal(t, seq([]string{"got.node.started report"}, think("think", ""), []string{"got.node.completed report"}), nodeEvents(evs, "report"))
	assert.Equal(t, "The folder holds notes.txt, which says to remember the milk.", only[event.RunCompleted](t, evs).Reply)

	var report, synth llm.Request
	for _, r := range e.model.requests() {
		switch {
		case strings.Contains(r.System, "Sub-task report:"):
			report = r
		case strings.Contains(r.System, "step: synthesize"):
			synth = r
		}
	}
	assert.Contains(t, report.System, "- read (Read notes.txt): notes.txt says: "+notes, "a node gets its predecessors' results")
	assert.Contains(t, report.System, "- list (List the working folder): The folder holds: ")
	assert.Contains(t, synth.System, "- report (Report on the folder and the notes): Report: one file, about milk.")
	assert.Empty(t, synth.Tools)
}

func TestGotSkipsTheDependantsOfAFailedNode(t *testing.T) {
	leaktest.Check(t, "agentwire/agentwire/internal")
	e := newEnv(t, "strategies")
	evs := e.runWith(e.agent(agent.Config{}), "got", "got failing")
	spans(t, evs)
	failed := payloads[event.GotNodeFailed](evs)
	require.Len(t, failed, 3)
	assert.Equal(t, "a", failed[0].NodeID)
	assert.False(t, failed[0].Skipped)
	assert.Contains(t, failed[0].Error, "upstream broke while fetching")
	assert.Equal(t, event.GotNodeFailed{NodeID: "b", Error: "skipped: it depends on a, which failed", Skipped: true}, failed[1])
	assert.Equal(t, event.GotNodeFailed{NodeID: "c", Error: "skipped: it depends on b, which failed", Skipped: true}, failed[2])
	assert.Equal(t, []string{"d"}, nodeIDs(payloads[event.GotNodeCompleted](evs)))
	assert.Equal(t, "Only the greeting worked.", only[event.RunCompleted](t, evs).Reply)
	for _, r := range e.model.requests() {
		assert.NotContains(t, r.System, "Sub-task b:", "a skipped node never runs")
	}
	var synth llm.Request
	for _, r := range e.model.requests() {
		if strings.Contains(r.System, "step: synthesize") {
			synth = r
		}
	}
	assert.Contains(t, synth.System, "- b (Use the data): FAILED: skipped: it depends on a, which failed")
}

func nodeIDs(ps []event.GotNodeCompleted) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.NodeID)
	}
	return out
}

func TestGotFailsWhenEveryNodeFails(t *testing.T) {
	leaktest.Check(t, "agentwire/agentwire/internal")
	e := newEnv(t, "strategies")
	evs := e.runWith(e.agent(agent.Config{}), "got", "got lost")
	out := outline(evs)
	assert.Equal(t, []string{"got.node.failed a", "got.node.failed b skipped", "run.failed tool_error"}, out[len(out)-3:])
	assert.Contains(t, only[event.RunFailed](t, evs).Message, "every sub-task failed")
}

func TestGotValidatesThePlan(t *testing.T) {
	leaktest.Check(t, "agentwire/agentwire/internal")
	for _, tc := range []struct {
		msg, firstErr, end string
	}{
		{"got cycle", "the dependencies form a cycle: a → b → a", "run.completed final_answer"},
		{"got unknown", `sub-task "a" depends on "nowhere", which is not in the plan`, "run.completed final_answer"},
		{"got dotted", `the id "1.1" has a "."; use letters, digits, "-" or "_"`, "run.completed final_answer"},
	} {
		t.Run(tc.msg, func(t *testing.T) {
			e := newEnv(t, "strategies")
			evs := e.runWith(e.agent(agent.Config{}), "got", tc.msg)
			exits := payloads[event.NodeExited](evs)
			assert.Equal(t, tc.firstErr, exits[0].Error)
			out := outline(evs)
			assert.Equal(t, tc.end, out[len(out)-1])
			assert.Contains(t, e.model.requests()[1].Messages[2].Content, tc.firstErr, "the retry shows the model why")
		})
	}
	// Two cyclic plans: the plan is one node, the whole request.
	e := newEnv(t, "strategies")
	evs := e.runWith(e.agent(agent.Config{}), "got", "got cycle")
	assert.Equal(t, []string{"The model's answer to the plan step could not be used, even after a retry (the dependencies form a cycle: a → c → b → a), so the plan is one sub-task: the whole request."},
		systemNotes(evs))
	assert.Equal(t, event.GotPlanned{NodeIDs: []string{"task"}, Tasks: []string{"got cycle"}}, only[event.GotPlanned](t, evs))
	assert.Equal(t, "Did it in one piece.", only[event.RunCompleted](t, evs).Reply)
}

// gate is a model that holds sub-task calls until width of them have
// arrived, then lets that group through, and records the most that were
// ever in flight together. Nodes run one at a time would wait at the
// gate forever.
type gate struct {
	llm.Model
	width int

	mu       sync.Mutex
	arrived  int
	inFlight int
	most     int
	open     chan struct{}
}

func (g *gate) Stream(ctx context.Context, req llm.Request) iter.Seq2[llm.Chunk, error] {
	if !strings.Contains(req.System, "step: sub-task") {
		return g.Model.Stream(ctx, req)
	}
	return func(yield func(llm.Chunk, error) bool) {
		g.mu.Lock()
		g.inFlight++
		g.most = max(g.most, g.inFlight)
		if g.open == nil {
			g.open = make(chan struct{})
		}
		open := g.open
		if g.arrived++; g.arrived%g.width == 0 {
			close(g.open)
			g.open = nil
		}
		g.mu.Unlock()
		defer func() {
			g.mu.Lock()
			g.inFlight--
			g.mu.Unlock()
		}()
		select {
		case <-open:
		case <-ctx.Done():
			yield(llm.Chunk{}, ctx.Err())
			return
		}
		for c, err := range g.Model.Stream(ctx, req) {
			if !yield(c, err) {
				return
			}
		}
	}
}

func TestGotRunsIndependentNodesConcurrentlyWithinItsBound(t *testing.T) {
	leaktest.Check(t, "agentwire/agentwire/internal")
	e := newEnv(t, "strategies")
	g := &gate{Model: e.model, width: 2}
	evs := e.runWith(e.agent(agent.Config{Model: g, GraphParallel: 2}), "got", "got wide")
	spans(t, evs)
	assert.Equal(t, 2, g.most, "two nodes ran at once, and never more than GraphParallel")
	assert.Len(t, payloads[event.GotNodeCompleted](evs), 4)
	assert.Equal(t, "All four done.", only[event.RunCompleted](t, evs).Reply)
}

func TestGotAdaptiveExpandsAComplexNode(t *testing.T) {
	leaktest.Check(t, "agentwire/agentwire/internal")
	e := newEnv(t, "strategies")
	evs := e.runWith(e.agent(agent.Config{}), "got_adaptive", "adaptive notes")
	order := spans(t, evs)
	assert.Equal(t, []string{"gather", "gather.list", "gather.read", "answer"}, order, "read depends on list, answer on gather")
	assert.Equal(t, event.GotExpanded{NodeID: "gather", NodesAdded: 2, EdgesAdded: 3,
		NodeIDs: []string{"gather.list", "gather.read"}, Tasks: []string{"List the folder", "Read notes.txt"}}, only[event.GotExpanded](t, evs))
	assert.Equal(t, seq([]string{"got.node.started gather"}, think("assess", "strategy"),
		[]string{"got.expanded gather [gather.list gather.read] 3"}), nodeEvents(evs, "gather"))
	assert.Equal(t, seq([]string{"got.node.started answer"}, think("assess", "strategy"), think("think", ""),
		[]string{"got.node.completed answer"}), nodeEvents(evs, "answer"))
	assert.Equal(t, []string{"gather.list", "gather.read", "gather", "answer"}, nodeIDs(payloads[event.GotNodeCompleted](evs)),
		"an expanded node completes once its sub-nodes have")
	gather := payloads[event.GotNodeCompleted](evs)[2]
	assert.Contains(t, gather.Summary, "gather.read: Read: "+notes)
	assert.Equal(t, "Gathered and answered.", only[event.RunCompleted](t, evs).Reply)

	var answer llm.Request
	for _, r := range e.model.requests() {
		assert.NotContains(t, r.System, "to assess: gather.", "sub-nodes are not assessed again")
		if strings.Contains(r.System, "Sub-task answer:") {
			answer = r
		}
	}
	assert.Contains(t, answer.System, "- gather (Gather the facts): gather.list: Listed: ")
}

// blocker holds every sub-task call until its context ends.
type blocker struct {
	llm.Model
	started chan struct{}
}

func (b *blocker) Stream(ctx context.Context, req llm.Request) iter.Seq2[llm.Chunk, error] {
	if !strings.Contains(req.System, "step: sub-task") {
		return b.Model.Stream(ctx, req)
	}
	return func(yield func(llm.Chunk, error) bool) {
		b.started <- struct{}{}
		<-ctx.Done()
		yield(llm.Chunk{}, ctx.Err())
	}
}

func TestGotCancelledWhileNodesRun(t *testing.T) {
	leaktest.Check(t, "agentwire/agentwire/internal")
	e := newEnv(t, "strategies")
	b := &blocker{Model: e.model, started: make(chan struct{}, 8)}
	r := e.startWith(e.agent(agent.Config{Model: b}), "got", "got wide")
	for range 4 {
		<-b.started // all four independent nodes are running
	}
	r.cancel()
	evs := e.wait(r)
	checkIDs(t, evs)
	spans(t, evs)
	out := outline(evs)
	assert.Equal(t, "run.cancelled cancelled", out[len(out)-1])
	failed := payloads[event.GotNodeFailed](evs)
	require.Len(t, failed, 4, "every running node reports its end")
	for _, f := range failed {
		assert.Equal(t, "cancelled", f.Error)
	}
	assert.Empty(t, payloads[event.GotNodeCompleted](evs))
}

func TestSpecMaxStepsLimitsOneRun(t *testing.T) {
	e := newEnv(t, "strategies")
	a := e.agent(agent.Config{MaxSteps: 10})
	r := e.startWith(a, "dup", "dup notes")
	r.spec.MaxSteps = 1 // not used: the spec is fixed at start
	evs := e.wait(r)
	assert.Equal(t, "run.completed final_answer", outline(evs)[len(outline(evs))-1])

	ctx := t.Context()
	spec := agent.Spec{Thread: e.thread, Run: event.NewID(), Input: "dup notes", Strategy: "dup", MaxSteps: 1}
	_, err := e.store.Append(ctx, e.thread, event.New(e.thread, spec.Run, event.MessageUser{MessageID: event.NewID(), Text: "dup notes"}))
	require.NoError(t, err)
	require.NoError(t, a.Run(ctx, spec, newJournal(e.store, e.thread), nil))
	evs = e.runEvents(spec.Run)
	f := only[event.RunFailed](t, evs)
	assert.Equal(t, event.RunFailed{Code: event.CodeStepLimit, Message: "The agent reached its limit of 1 model calls without a final answer."}, f)
}

// TestStrategyDemos plays the built-in scenario's demo of each strategy.
func TestStrategyDemos(t *testing.T) {
	for _, tc := range []struct {
		strategy string
		want     []event.Type
	}{
		{"dup", []event.Type{event.TypeToolExecCompleted}},
		{"tot", []event.Type{event.TypeTotExpanded, event.TypeTotEvaluated, event.TypeTotBacktracked}},
		{"got", []event.Type{event.TypeGotPlanned, event.TypeGotNodeStarted, event.TypeGotNodeCompleted}},
		{"got_adaptive", []event.Type{event.TypeGotPlanned, event.TypeGotExpanded, event.TypeGotNodeCompleted}},
	} {
		t.Run(tc.strategy, func(t *testing.T) {
			e := newEnv(t, "strategies")
			e.model = &recorder{Model: scripted.New(scripted.Default(), scripted.WithPacing(scripted.Pacing{}))}
			evs := e.runWith(e.agent(agent.Config{}), tc.strategy, "demo "+tc.strategy)
			done := only[event.RunCompleted](t, evs)
			assert.Contains(t, done.Reply, "That was "+tc.strategy+":")
			for _, typ := range tc.want {
				assert.True(t, slices.ContainsFunc(evs, func(e event.Event) bool { return e.Type() == typ }), "%s has no %s", tc.strategy, typ)
			}
			for _, f := range payloads[event.NodeExited](evs) {
				assert.Empty(t, f.Error, "no step of the demo is retried")
			}
		})
	}
}

func TestTotBacktracksToAShallowerDepth(t *testing.T) {
	leaktest.Check(t, "agentwire/agentwire/internal")
	e := newEnv(t, "strategies")
	evs := e.runWith(e.agent(agent.Config{}), "tot", "tot shallow")
	assert.Equal(t, seq(
		[]string{"run.started tot"},
		think("expand", "strategy"),
		[]string{`tot.expanded 1 ["List the folder" "Answer right away"]`},
		think("evaluate", "strategy"),
		[]string{"tot.evaluated 0 [0.8 0.3]"},
		call("ls", false),
		think("expand", "strategy"),
		[]string{`tot.expanded 2 ["Read missing.txt"]`},
		think("evaluate", "strategy"),
		[]string{"tot.evaluated 0 [0.5]"},
		call("read", true),
		[]string{"tot.backtracked 1 1"},
		think("think", ""),
		[]string{"run.completed final_answer"},
	), outline(evs))
	assert.Equal(t, "Answered without the folder.", only[event.RunCompleted](t, evs).Reply)
	reqs := e.model.requests()
	last := reqs[len(reqs)-1]
	assert.Equal(t, []llm.Message{{Role: llm.RoleUser, Content: "tot shallow"}}, last.Messages, "back at depth 1, before the listing")
	assert.Contains(t, last.System, `"List the folder" led only to dead ends`)
}

func TestGotNodesAskForApprovalAndShareApproveAlways(t *testing.T) {
	leaktest.Check(t, "agentwire/agentwire/internal")
	e := newEnv(t, "strategies")
	r := e.startSpec(e.agent(agent.Config{Policy: tools.PolicySuggest}), agent.Spec{Input: "got approvals", Strategy: "got", Interactive: true})
	req := approve(t, r, 1, event.DecisionApproveAlways, "")
	assert.Equal(t, []string{"touch", "a.txt"}, req.Command)
	evs := e.wait(r)
	checkIDs(t, evs)
	order := spans(t, evs)
	require.Len(t, order, 3)
	assert.Less(t, slices.Index(order, "mk1"), slices.Index(order, "mk2"), "mk2 waits for mk1: %v", order)
	assert.Len(t, payloads[event.ToolApprovalRequested](evs), 1, "mk2's touch is approved for good by mk1's answer")
	assert.Contains(t, nodeEvents(evs, "mk1"), "tool.approval.requested bash")
	assert.True(t, exists(t, e.workdir, "a.txt"))
	assert.True(t, exists(t, e.workdir, "b.txt"))
	assert.Equal(t, "Made both, and read the notes.", only[event.RunCompleted](t, evs).Reply)
}
