package loom_test

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/generated/loomapi"
	"github.com/agentwire/agentwire/internal/config"
)

// compact names a run's events by type, with a run of the same chunk type
// counted once (how a reply is split into chunks is the model's business)
// and the state snapshots after each node_exit written as one "+state".
func compact(events []loomapi.ProtocolEventValue) []string {
	var out []string
	tt := types(events)
	for i := 0; i < len(tt); i++ {
		typ := tt[i]
		if n := len(out); n > 0 && out[n-1] == typ && strings.HasSuffix(typ, "_chunk") {
			continue
		}
		if typ == "updates" && i+2 < len(tt) && tt[i+1] == "values" && tt[i+2] == "checkpoint" {
			out = append(out, "+state")
			i += 2
			continue
		}
		out = append(out, typ)
	}
	return out
}

// Each agent kind, run on a scripted scenario, streams exactly this
// sequence of event types.
func TestStrategyEventSequences(t *testing.T) {
	think := func(extra ...string) []string {
		return append(append([]string{"node_enter"}, extra...), "usage", "node_exit", "+state")
	}
	seq := func(parts ...[]string) []string {
		var out []string
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	one := func(s ...string) []string { return s }
	act := one("node_enter", "tool_start", "tool_end", "node_exit", "+state")
	toolTurn := think("tool_call_chunk", "tool_call")
	textTurn := think("message_chunk")
	thought := think("thought_chunk")
	for _, tc := range []struct {
		agent, message string
		adaptive       bool
		want           []string
		reply          string
		nodes          string // the node_enter names, when checked
	}{
		{agent: "react", message: "echo one turn", want: seq(textTurn), reply: "You said: echo one turn"},
		{agent: "react", message: "look around", want: seq(
			think("thought_chunk", "message_chunk", "tool_call_chunk", "tool_call"), act, textTurn)},
		{agent: "dup", message: "dup the memo", want: seq(
			thought,                                                 // understand
			thought,                                                 // plan
			toolTurn, act, one("node_enter", "node_exit", "+state"), // observe
			textTurn),
			reply: "The memo says: milk", nodes: "understand plan think act observe think"},
		{agent: "tot", message: "tot the memo", want: seq(
			thought, one("tot_expand"), thought, one("tot_evaluate"),
			toolTurn, act, one("tot_backtrack"),
			toolTurn, act,
			thought, one("tot_expand"), thought, one("tot_evaluate"),
			textTurn),
			reply: "The memo says: milk", nodes: "expand evaluate think act think act expand evaluate think"},
		{agent: "got", message: "got the memo", want: seq(
			thought, one("got_plan"),
			one("got_node_start"), toolTurn, act, textTurn, one("got_node_complete"),
			one("got_node_start"), textTurn, one("got_node_complete"),
			textTurn),
			reply: "The memo is about milk.", nodes: "plan think act think think synthesize"},
		{agent: "got", adaptive: true, message: "adapt the memo", want: seq(
			thought, one("got_plan"),
			one("got_node_start"), thought, one("got_expand"),
			one("got_node_start"), toolTurn, act, textTurn, one("got_node_complete"),
			one("got_node_start"), toolTurn, act, textTurn, one("got_node_complete"),
			one("got_node_complete"),
			one("got_node_start"), thought, textTurn, one("got_node_complete"),
			textTurn),
			reply: "Gathered, then answered: milk.", nodes: "plan assess think act think think act think assess think synthesize"},
		{agent: "got", message: "got broken", want: seq(
			thought, one("got_plan"),
			one("got_node_start"), textTurn, one("got_node_complete"),
			one("got_node_start"), one("node_enter", "node_exit", "+state"), one("got_node_failed"),
			one("got_node_failed"), // c, skipped
			textTurn),
			reply: "Only the greeting worked."},
	} {
		t.Run(tc.agent+"/"+tc.message, func(t *testing.T) {
			h := start(t, testConfig(t))
			h.write("memo.txt", "milk")
			h.write("notes.txt", "buy milk")
			c := h.dial()
			r := runReq("", tc.agent, tc.message)
			if tc.adaptive {
				r.GotAdaptive = new(true)
			}
			res := c.run(r)
			require.NotNil(t, res.end, "%+v", res.err)
			assert.Equal(t, tc.want, compact(res.events), "%q", compact(res.events))
			var nodes []string
			visits := map[string]int{}
			for _, e := range res.events {
				if n, ok := e.(loomapi.NodeEnterEvent); ok {
					nodes = append(nodes, n.ID)
					visits[n.ID]++
					assert.Equal(t, fmt.Sprintf("run-%s-%d", n.ID, visits[n.ID]), *n.NodeID)
				}
			}
			if tc.nodes != "" {
				assert.Equal(t, tc.nodes, strings.Join(nodes, " "))
			}
			if tc.reply != "" {
				assert.Equal(t, tc.reply, res.end.Reply)
			}
			for i, e := range res.events {
				assert.Equal(t, i+1, *envelopeOf(t, e).EventID)
			}
			assert.Equal(t, len(res.events)+1, *res.end.EventID)
		})
	}
}

// The built-in scenario's demo prompts run every agent kind offline over
// Loom, each with the events of its strategy.
func TestDemosRunOffline(t *testing.T) {
	cfg, err := config.Parse([]string{"--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--workdir", t.TempDir()},
		func(string) string { return "" }, io.Discard)
	require.NoError(t, err)
	h := start(t, cfg)
	h.write("notes.txt", "demo notes")
	c := h.dial()
	for _, tc := range []struct {
		agent, message string
		adaptive       bool
		must           []string
	}{
		{"react", "demo tools", false, []string{"tool_call", "tool_end"}},
		{"dup", "demo dup", false, []string{"thought_chunk", "tool_end"}},
		{"tot", "demo tot", false, []string{"tot_expand", "tot_evaluate", "tot_backtrack"}},
		{"got", "demo got", false, []string{"got_plan", "got_node_start", "got_node_complete"}},
		{"got", "demo got_adaptive", true, []string{"got_plan", "got_expand", "got_node_complete"}},
	} {
		r := runReq("", tc.agent, tc.message)
		if tc.adaptive {
			r.GotAdaptive = new(true)
		}
		res := c.run(r)
		require.NotNil(t, res.end, "%s: %+v", tc.message, res.err)
		assert.NotEmpty(t, res.end.Reply, tc.message)
		assert.Subset(t, types(res.events), tc.must, tc.message)
	}
	// The README's approval demo.
	c.send(runReq("r1", "react", "demo approval"))
	ask := c.waitApproval()
	c.send(approval("r1", *ask.CallID, "approve"))
	res := c.readRun()
	require.NotNil(t, res.end, "%+v", res.err)
	assert.Contains(t, types(res.events), "tool_end")
}

// A strategy whose model output stays unusable after one retry does not
// fail the run: the step falls back, a system_message says so, and the
// run ends with a reply.
func TestBadModelOutputFallsBack(t *testing.T) {
	h := start(t, testConfig(t))
	c := h.dial()
	res := c.run(runReq("stubborn", "dup", "dup stubborn"))
	require.NotNil(t, res.end, "the run completes: %+v", res.err)
	assert.NotEmpty(t, res.end.Reply)
	var exits []string
	var notes []string
	for _, e := range res.events {
		switch x := e.(type) {
		case loomapi.NodeExitEvent:
			exits = append(exits, string(x.Result))
		case loomapi.CustomEvent:
			var v struct{ Kind, Text string }
			require.NoError(t, json.Unmarshal(x.Value, &v))
			if v.Kind == "system_message" {
				notes = append(notes, v.Text)
			}
		}
	}
	require.GreaterOrEqual(t, len(exits), 2)
	for _, x := range exits[:2] {
		assert.Contains(t, x, `{"Err":`, "the understand step is tried twice")
	}
	require.Len(t, notes, 1)
	assert.Contains(t, notes[0], "understand step could not be used")
	assert.Contains(t, notes[0], "JSON")
}
