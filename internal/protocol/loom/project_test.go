package loom

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/generated/loomapi"
	"github.com/agentwire/agentwire/internal/event"
)

// project runs payloads through a new projector and returns the frames,
// each checked against the document and encoded.
func project(t *testing.T, ps ...event.Payload) []map[string]any {
	t.Helper()
	p := newProjector("run-1", "thread-1", "got", "hello", false)
	var out []map[string]any
	for i, pl := range ps {
		e := event.Event{Thread: "thread-1", Seq: int64(i + 1), ID: event.NewID(), Run: "r", Time: time.Unix(0, 0).UTC(), Payload: pl}
		for _, m := range p.Project(e) {
			b, err := loomapi.Encode(m)
			require.NoError(t, err)
			require.NoError(t, loomapi.ValidateOutbound(b), "%s", b)
			var v map[string]any
			require.NoError(t, json.Unmarshal(b, &v))
			if ev, ok := v["event"].(map[string]any); ok {
				v = ev
			}
			out = append(out, v)
		}
	}
	return out
}

// What Loom has no event for travels as custom {kind, ...}; system
// notices and explanations are not reply chunks; strategy messages are
// thought chunks.
func TestProjectCustomAndHidden(t *testing.T) {
	got := project(t,
		event.NodeEntered{Node: "think"},
		event.MessageStarted{MessageID: "s", Role: event.RoleAssistant, Purpose: event.PurposeStrategy},
		event.MessageDelta{MessageID: "s", Text: "{\"plan\":1}"},
		event.MessageCompleted{MessageID: "s", Role: event.RoleAssistant, Purpose: event.PurposeStrategy, Text: "{\"plan\":1}"},
		event.MessageStarted{MessageID: "x", Role: event.RoleAssistant, Purpose: event.PurposeExplanation},
		event.MessageDelta{MessageID: "x", Text: "it lists files"},
		event.MessageStarted{MessageID: "n", Role: event.RoleSystem},
		event.MessageDelta{MessageID: "n", Text: "not run"},
		event.MessageCompleted{MessageID: "n", Role: event.RoleSystem, Text: "not run"},
		event.InputRequested{RequestID: "q", Prompt: "name?"},
		event.ToolExecProgress{CallID: "c", Name: "bash", Percent: 50},
		event.ContextCompacted{OldTokens: 900, NewTokens: 100},
		event.ToolApprovalResolved{CallID: "c", Decision: event.DecisionDenyContinue, Message: "no"},
	)
	var kinds []string
	for _, f := range got {
		switch f["type"] {
		case "custom":
			kinds = append(kinds, f["value"].(map[string]any)["kind"].(string))
		default:
			kinds = append(kinds, f["type"].(string))
		}
	}
	assert.Equal(t, []string{"node_enter", "thought_chunk", "system_message", "input_requested", "tool_progress", "context_compacted", "tool_approval_resolved"}, kinds)
	assert.Equal(t, "deny", got[6]["value"].(map[string]any)["decision"])
}

// node_exit carries {"Err": ...} for a failed node; got_expand has no
// envelope node_id (its payload has one); malformed tool arguments are
// kept as {"raw": ...}; the state tracks the GoT plan.
func TestProjectShapes(t *testing.T) {
	got := project(t,
		event.NodeEntered{Node: "plan"},
		event.NodeExited{Node: "plan", Error: "not JSON"},
		event.GotPlanned{NodeIDs: []string{"a", "b"}, EdgeCount: 1, Tasks: []string{"A", "B"}},
		event.GotNodeStarted{NodeID: "a"},
		event.GotExpanded{NodeID: "a", NodesAdded: 2, EdgesAdded: 3, NodeIDs: []string{"a.x", "a.y"}, Tasks: []string{"X", "Y"}},
		event.GotNodeFailed{NodeID: "b", Error: "skipped", Skipped: true},
		event.NodeEntered{Node: "think"},
		event.ToolCallCompleted{CallID: "c1", Name: "bash", Arguments: json.RawMessage(`{"command": `)},
		event.NodeExited{Node: "think"},
		event.RunFailed{Code: "model_error"},
	)
	require.Len(t, got, 16)
	assert.Equal(t, map[string]any{"Err": "not JSON"}, got[1]["result"])
	assert.Equal(t, "run-plan-1", got[1]["node_id"])
	assert.Equal(t, float64(2), got[5]["node_count"])
	exp := got[7]
	assert.Equal(t, "got_expand", exp["type"])
	assert.Equal(t, "a", exp["node_id"], "got_expand's node_id is its payload")
	call := got[10]
	assert.Equal(t, "tool_call", call["type"])
	assert.Equal(t, map[string]any{"raw": `{"command": `}, call["arguments"])
	values := got[13]
	assert.Equal(t, "values", values["type"])
	state := values["state"].(map[string]any)
	assert.Equal(t, []any{
		map[string]any{"id": "a", "task": "A", "status": "expanded"},
		map[string]any{"id": "b", "task": "B", "status": "skipped", "error": "skipped"},
		map[string]any{"id": "a.x", "task": "X", "status": "planned"},
		map[string]any{"id": "a.y", "task": "Y", "status": "planned"},
	}, state["got"].(map[string]any)["nodes"])
	assert.Equal(t, map[string]any{"type": "error", "id": "run-1", "error": "the run failed (model_error)"}, got[15])
}

// BenchmarkProject measures projecting and encoding a react run's events
// (a reply of 200 chunks, a tool call, two nodes), against encoding the
// same number of ready-made frames: the ratio is the projector's cost.
func BenchmarkProject(b *testing.B) {
	var ps []event.Payload
	ps = append(ps, event.RunStarted{Strategy: "react", Input: "hi"}, event.NodeEntered{Node: "think"},
		event.MessageStarted{MessageID: "m", Role: event.RoleAssistant})
	for range 200 {
		ps = append(ps, event.MessageDelta{MessageID: "m", Text: "word "})
	}
	ps = append(ps, event.MessageCompleted{MessageID: "m", Role: event.RoleAssistant, Text: "words"},
		event.ToolCallCompleted{CallID: "c", Name: "read", Arguments: json.RawMessage(`{"path":"a.txt"}`)},
		event.Usage{PromptTokens: 10, CompletionTokens: 200, TotalTokens: 210}, event.NodeExited{Node: "think"},
		event.NodeEntered{Node: "act"}, event.ToolExecStarted{CallID: "c", Name: "read"},
		event.ToolExecCompleted{CallID: "c", Name: "read", Result: "text"}, event.NodeExited{Node: "act"},
		event.RunCompleted{Reason: "final_answer", Reply: "words"})
	evs := make([]event.Event, len(ps))
	for i, p := range ps {
		evs[i] = event.Event{Thread: "t", Seq: int64(i + 1), ID: event.NewID(), Run: "r", Time: time.Now().UTC(), Payload: p}
	}
	frames := newProjector("run-1", "t", "react", "hi", false)
	var ready []loomapi.Outbound
	for _, e := range evs {
		ready = append(ready, frames.Project(e)...)
	}
	b.Run("encode-only", func(b *testing.B) {
		for b.Loop() {
			for _, m := range ready {
				if _, err := loomapi.Encode(m); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(len(ready)), "frames/op")
	})
	b.Run("project-and-encode", func(b *testing.B) {
		for b.Loop() {
			p := newProjector("run-1", "t", "react", "hi", false)
			for _, e := range evs {
				for _, m := range p.Project(e) {
					if _, err := loomapi.Encode(m); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
		b.ReportMetric(float64(len(ready)), "frames/op")
	})
}
