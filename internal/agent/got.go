package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/llm"
)

// Limits of got's graph.
const (
	minPlanNodes   = 2
	maxPlanNodes   = 8
	minExpandNodes = 2
	maxExpandNodes = 6
	maxGraphNodes  = 64
	// maxInputChars caps each node result another step's instruction
	// quotes.
	maxInputChars = 4000
)

// graphPlanInstruction asks for got's plan.
const graphPlanInstruction = `Strategy step: plan graph.
Split the work the user's last message asks for into %d to %d sub-tasks that together achieve it. A sub-task may depend on others: it then runs after them and gets their results. Sub-tasks with no dependency between them run at the same time. Dependencies must not form a cycle.
Reply with only a JSON object of this shape, and nothing else:
{"nodes": [{"id": "short_id", "task": "what to do, in a sentence", "deps": ["ids of the sub-tasks it needs"]}]}`

// assessInstruction asks got_adaptive whether a sub-task is worth
// splitting: %s is the sub-task.
const assessInstruction = `Strategy step: assess.
The user's request is being worked on as a graph of sub-tasks.
Sub-task to assess: %s
If it is complex enough to be worth splitting, split it into %d to %d smaller sub-tasks (deps name sibling sub-tasks only, without cycles). Otherwise keep it whole.
Reply with only a JSON object, and nothing else: {"expand": false, "nodes": []} to keep it whole, or
{"expand": true, "nodes": [{"id": "short_id", "task": "what to do", "deps": []}]}`

// nodesSchema is the JSON Schema of a list of lo to hi sub-tasks.
func nodesSchema(lo, hi int) string {
	return fmt.Sprintf(`{"type": "array", "minItems": %d, "maxItems": %d, "items": {"type": "object",
		"properties": {
			"id": {"type": "string", "description": "a short id: letters, digits, - or _"},
			"task": {"type": "string", "description": "what to do, in a sentence"},
			"deps": {"type": "array", "items": {"type": "string"}, "description": "ids of the sub-tasks it needs"}
		},
		"required": ["id", "task", "deps"], "additionalProperties": false}}`, lo, hi)
}

// planSchema is the structure of got's plan.
var planSchema = schema("plan", `{"type": "object", "properties": {"nodes": `+nodesSchema(minPlanNodes, maxPlanNodes)+`},
	"required": ["nodes"], "additionalProperties": false}`)

// assessSchema is the structure of an assessment that may split a node
// into lo to hi sub-nodes (an empty list keeps it whole).
func assessSchema(hi int) *llm.Schema {
	return schema("assessment", `{"type": "object", "properties": {"expand": {"type": "boolean"}, "nodes": `+nodesSchema(0, hi)+`},
	"required": ["expand", "nodes"], "additionalProperties": false}`)
}

// subtaskInstruction is the system instruction of a sub-task's ReAct
// loop: its id and task, then the results it depends on.
const subtaskInstruction = `Strategy step: sub-task.
The user's request is being worked on as a graph of sub-tasks. Do only this one, with the tools as needed, and answer with its result:
Sub-task %s: %s%s`

// synthesizeInstruction is the instruction of got's last step.
const synthesizeInstruction = `Strategy step: synthesize.
The user's last message was worked on as a graph of sub-tasks. Their results:
%s
Using them, give the user your final answer to their message.`

// planNode is a sub-task as the model plans it.
type planNode struct {
	ID   string   `json:"id"`
	Task string   `json:"task"`
	Deps []string `json:"deps"`
}

// parseGraph validates a planned graph of lo..hi nodes: ids unique and
// not empty, tasks not empty, dependencies known and acyclic.
func parseGraph(text string, lo, hi int) ([]planNode, error) {
	var out struct {
		Nodes []planNode `json:"nodes"`
	}
	if err := decodeJSON(text, &out); err != nil {
		return nil, err
	}
	nodes := out.Nodes
	if len(nodes) < lo || len(nodes) > hi {
		return nil, invalid("the plan has %d sub-tasks; it must have %d to %d", len(nodes), lo, hi)
	}
	index := map[string]int{}
	for i, n := range nodes {
		n.ID = strings.TrimSpace(n.ID)
		nodes[i].ID = n.ID
		switch {
		case n.ID == "":
			return nil, invalid("sub-task %d has no id", i+1)
		case strings.TrimSpace(n.Task) == "":
			return nil, invalid("sub-task %q has no task", n.ID)
		}
		if _, dup := index[n.ID]; dup {
			return nil, invalid("two sub-tasks have the id %q", n.ID)
		}
		index[n.ID] = i
	}
	for _, n := range nodes {
		for _, d := range n.Deps {
			if _, ok := index[d]; !ok {
				return nil, invalid("sub-task %q depends on %q, which is not in the plan", n.ID, d)
			}
			if d == n.ID {
				return nil, invalid("sub-task %q depends on itself", n.ID)
			}
		}
	}
	if cycle := findCycle(nodes, index); cycle != nil {
		return nil, invalid("the dependencies form a cycle: %s", strings.Join(cycle, " → "))
	}
	return nodes, nil
}

// findCycle returns a dependency cycle of nodes as ids (the first id
// repeated last), or nil.
func findCycle(nodes []planNode, index map[string]int) []string {
	const (
		unseen = iota
		onPath
		finished
	)
	state := make([]int, len(nodes))
	var path []string
	var visit func(i int) []string
	visit = func(i int) []string {
		state[i] = onPath
		path = append(path, nodes[i].ID)
		for _, d := range nodes[i].Deps {
			j := index[d]
			switch state[j] {
			case onPath:
				at := slices.Index(path, d)
				return append(slices.Clone(path[at:]), d)
			case unseen:
				if c := visit(j); c != nil {
					return c
				}
			}
		}
		path = path[:len(path)-1]
		state[i] = finished
		return nil
	}
	for i := range nodes {
		if state[i] == unseen {
			if c := visit(i); c != nil {
				return c
			}
		}
	}
	return nil
}

// Node states.
const (
	nodePending = iota
	nodeRunning
	nodeDone
	nodeFailed
)

// gnode is a node of the graph as it runs.
type gnode struct {
	id, task string
	deps     []string
	sub      bool // added by an expansion: not expanded again
	joined   bool // expanded: completes when its sub-nodes have
	state    int
	result   string
	err      string
}

// outcome is what a node's goroutine reports.
type outcome struct {
	id       string
	result   string
	err      error
	expanded []planNode // got_adaptive split the node into these
	reserved int
}

func got(ctx context.Context, r *run)         { r.graph(ctx, false) }
func gotAdaptive(ctx context.Context, r *run) { r.graph(ctx, true) }

// graph is graph-of-thoughts: the model plans a DAG of sub-tasks
// (got.planned), each runs as a ReAct loop of its own in dependency order,
// with its predecessors' results in its instructions, independent ones at
// the same time (at most Config.GraphParallel); a failed node
// (got.node.failed) has its dependants skipped. Adaptive, each planned
// node is first assessed and may be split into sub-nodes (got.expanded).
// The model's last call answers the user from the results.
func (r *run) graph(ctx context.Context, adaptive bool) {
	var plan []planNode
	if err := r.decide(ctx, r.msgs, step{node: "plan", instruction: fmt.Sprintf(graphPlanInstruction, minPlanNodes, maxPlanNodes), schema: planSchema,
		parse: func(text string) (err error) {
			plan, err = parseGraph(text, minPlanNodes, maxPlanNodes)
			for _, n := range plan {
				if err == nil && strings.Contains(n.ID, ".") {
					// "." joins a node's id to its sub-nodes'.
					err = invalid("the id %q has a \".\"; use letters, digits, \"-\" or \"_\"", n.ID)
				}
			}
			return err
		},
		fallback: func(string) string {
			task := clip(r.lastUserText(), maxFallbackChars)
			if task == "" {
				task = "Answer the user's last message."
			}
			plan = []planNode{{ID: "task", Task: task}}
			return "the plan is one sub-task: the whole request"
		},
	}); err != nil {
		r.fail(ctx, err)
		return
	}
	planned := event.GotPlanned{}
	var nodes []*gnode
	for _, n := range plan {
		planned.NodeIDs = append(planned.NodeIDs, n.ID)
		planned.Tasks = append(planned.Tasks, n.Task)
		for _, d := range n.Deps {
			planned.Edges = append(planned.Edges, [2]string{d, n.ID})
		}
		nodes = append(nodes, &gnode{id: n.ID, task: n.Task, deps: slices.Clone(n.Deps)})
	}
	planned.EdgeCount = len(planned.Edges)
	r.emit(planned)

	nodes = r.schedule(ctx, nodes, adaptive)
	if ctx.Err() != nil {
		r.end(ctx, ctx.Err(), event.CodeInternal)
		return
	}
	var results strings.Builder
	ok := 0
	for _, n := range nodes {
		if n.sub {
			continue // their parent holds their results
		}
		if n.state == nodeDone {
			ok++
			fmt.Fprintf(&results, "- %s (%s): %s\n", n.id, n.task, clip(n.result, maxInputChars))
		} else {
			fmt.Fprintf(&results, "- %s (%s): FAILED: %s\n", n.id, n.task, n.err)
		}
	}
	if ok == 0 {
		r.end(ctx, fmt.Errorf("every sub-task failed:\n%s", results.String()), event.CodeToolError)
		return
	}
	r.emit(event.NodeEntered{Node: "synthesize"})
	turn, err := r.stream(ctx, llm.Request{System: r.withInstruction(fmt.Sprintf(synthesizeInstruction, results.String())), Messages: r.msgs}, "")
	exit := event.NodeExited{Node: "synthesize"}
	if err != nil {
		exit.Error = err.Error()
	}
	r.emit(exit)
	if err != nil {
		r.end(ctx, fmt.Errorf("model error: %w", err), event.CodeModelError)
		return
	}
	r.msgs = append(r.msgs, turn)
	r.emit(event.RunCompleted{Reason: "final_answer", Reply: turn.Content})
}

// schedule runs the graph to its end and returns its nodes, sub-nodes
// included. Every goroutine it starts has reported before it returns.
// When ctx is done it starts nothing more and waits for the running.
func (r *run) schedule(ctx context.Context, nodes []*gnode, adaptive bool) []*gnode {
	st := newStage()
	byID := map[string]*gnode{}
	for _, n := range nodes {
		byID[n.id] = n
	}
	done := make(chan outcome, maxGraphNodes)
	running, reserved := 0, 0
	for {
		// Settle: skip what depends on a failure, complete joined nodes
		// whose sub-nodes are done; until nothing changes.
		for changed := true; changed; {
			changed = false
			for _, n := range nodes {
				if n.state != nodePending {
					continue
				}
				if bad := depIn(n, byID, nodeFailed); bad != "" {
					n.state, n.err = nodeFailed, "skipped: it depends on "+bad+", which failed"
					st.announce(r, event.GotNodeFailed{NodeID: n.id, Error: n.err, Skipped: true})
					changed = true
				} else if n.joined && ready(n, byID) {
					n.state, n.result = nodeDone, joinResults(n, byID)
					st.announce(r, event.GotNodeCompleted{NodeID: n.id, Summary: clip(n.result, 500)})
					changed = true
				}
			}
		}
		if ctx.Err() == nil {
			for _, n := range nodes {
				if running == r.a.cfg.GraphParallel {
					break
				}
				if n.state != nodePending || n.joined || !ready(n, byID) {
					continue
				}
				room := 0
				if adaptive && !n.sub {
					room = min(maxExpandNodes, maxGraphNodes-len(nodes)-reserved)
					if room < minExpandNodes {
						room = 0
					}
					reserved += room
				}
				n.state = nodeRunning
				running++
				system := r.withInstruction(fmt.Sprintf(subtaskInstruction, n.id, n.task, inputs(n, byID)))
				go func(n *gnode, room int) {
					done <- r.runNode(ctx, st, n.id, n.task, system, room)
				}(n, room)
			}
		}
		if running == 0 {
			return nodes
		}
		o := <-done
		running--
		reserved -= o.reserved
		n := byID[o.id]
		switch {
		case o.err != nil:
			n.state, n.err = nodeFailed, o.err.Error()
		case o.expanded != nil:
			n.state, n.joined = nodePending, true
			for _, s := range o.expanded {
				id := n.id + "." + s.ID
				deps := slices.Clone(n.deps)
				for _, d := range s.Deps {
					deps = append(deps, n.id+"."+d)
				}
				c := &gnode{id: id, task: s.Task, deps: deps, sub: true}
				nodes = append(nodes, c)
				byID[id] = c
				n.deps = append(n.deps, id)
			}
		default:
			n.state, n.result = nodeDone, o.result
		}
	}
}

// runNode runs one node on its own goroutine: its assessment when room
// allows an expansion, else its ReAct loop.
func (r *run) runNode(ctx context.Context, st *stage, id, task, system string, room int) (o outcome) {
	o = outcome{id: id, reserved: room}
	v := &voice{st: st}
	defer v.leave(r.em)
	f := r.fork(r.system, slices.Clone(r.msgs), v) // assessed with the run's own role
	f.emit(event.GotNodeStarted{NodeID: id})
	if room > 0 {
		sub, err := f.assess(ctx, id, task, room)
		if err != nil {
			return f.nodeFailed(ctx, o, err)
		}
		if sub != nil {
			ex := event.GotExpanded{NodeID: id, NodesAdded: len(sub)}
			for _, s := range sub {
				ex.NodeIDs = append(ex.NodeIDs, id+"."+s.ID)
				ex.Tasks = append(ex.Tasks, s.Task)
				ex.EdgesAdded += len(s.Deps) + 1 // its sibling deps and its edge to the node
			}
			f.emit(ex)
			o.expanded = sub
			return o
		}
	}
	f.system = system
	reply, err := f.loop(ctx, false)
	if err != nil {
		return f.nodeFailed(ctx, o, err)
	}
	o.result = reply
	f.emit(event.GotNodeCompleted{NodeID: id, Summary: clip(reply, 500)})
	return o
}

// nodeFailed reports o's node failed with err ("cancelled" once ctx is).
func (r *run) nodeFailed(ctx context.Context, o outcome, err error) outcome {
	if ctx.Err() != nil {
		err = errors.New("cancelled")
	}
	o.err = err
	r.emit(event.GotNodeFailed{NodeID: o.id, Error: err.Error()})
	return o
}

// assess asks whether a node should be split, into at most room
// sub-nodes; nil keeps it whole, as does an assessment that cannot be
// used.
func (r *run) assess(ctx context.Context, id, task string, room int) ([]planNode, error) {
	var sub []planNode
	err := r.decide(ctx, r.msgs, step{node: "assess", instruction: fmt.Sprintf(assessInstruction, id+": "+task, minExpandNodes, room), schema: assessSchema(room),
		parse: func(text string) error {
			var out struct {
				Expand *bool `json:"expand"`
			}
			if err := decodeJSON(text, &out); err != nil {
				return err
			}
			if out.Expand == nil {
				return invalid(`"expand" is missing: say true or false`)
			}
			if !*out.Expand {
				sub = nil
				return nil
			}
			var err error
			sub, err = parseGraph(text, minExpandNodes, room)
			return err
		},
		fallback: func(string) string {
			sub = nil
			return "sub-task " + id + " runs as planned, unsplit"
		},
	})
	return sub, err
}

// ready reports whether every dependency of n is done.
func ready(n *gnode, byID map[string]*gnode) bool {
	for _, d := range n.deps {
		if byID[d].state != nodeDone {
			return false
		}
	}
	return true
}

// depIn returns the first dependency of n in state, or "".
func depIn(n *gnode, byID map[string]*gnode, state int) string {
	for _, d := range n.deps {
		if byID[d].state == state {
			return d
		}
	}
	return ""
}

// inputs lists the results n depends on, for its instruction.
func inputs(n *gnode, byID map[string]*gnode) string {
	if len(n.deps) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\nResults of the sub-tasks it depends on:")
	for _, d := range n.deps {
		fmt.Fprintf(&b, "\n- %s (%s): %s", d, byID[d].task, clip(byID[d].result, maxInputChars))
	}
	return b.String()
}

// joinResults is an expanded node's result: its sub-nodes'.
func joinResults(n *gnode, byID map[string]*gnode) string {
	var parts []string
	for _, d := range n.deps {
		if strings.HasPrefix(d, n.id+".") {
			parts = append(parts, d+": "+byID[d].result)
		}
	}
	return strings.Join(parts, "\n")
}
