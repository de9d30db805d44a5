package scripted_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/agent"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/tools"
)

// journal is a thread's log held in memory.
type journal struct {
	mu     sync.Mutex
	events []event.Event
}

func (j *journal) Append(_ context.Context, evs ...event.Event) ([]event.Event, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for i := range evs {
		evs[i].Seq = int64(len(j.events) + 1)
		j.events = append(j.events, evs[i])
	}
	return evs, nil
}

func (j *journal) History(context.Context) ([]event.Event, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]event.Event(nil), j.events...), nil
}

// A journal sends no previews: its runs commit deltas as they come.
func (j *journal) Preview(event.Event)   {}
func (j *journal) Previews() bool        { return false }
func (j *journal) WaitsForCommits() bool { return true }

func (j *journal) since(seq int) []event.Event {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]event.Event(nil), j.events[seq:]...)
}

// lsTool lists a fixed folder.
type lsTool struct{ listing string }

func (lsTool) Spec() tools.Spec {
	return tools.Spec{Name: "ls", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)}
}
func (lsTool) Classify(json.RawMessage) tools.Class { return tools.Class{Effect: tools.EffectRead} }
func (t lsTool) Run(_ context.Context, args json.RawMessage, _ tools.Output) (tools.Result, error) {
	var a struct{ Path string }
	if err := json.Unmarshal(args, &a); err != nil || a.Path != "." {
		return tools.Result{Content: "bad arguments: " + string(args), IsError: true}, nil
	}
	return tools.Result{Content: t.listing}, nil
}

// TestWithTheAgent runs the default scenario under the real ReAct loop,
// where every model call is rebuilt from the thread's log: the scripted
// model must pick up after the tool result with nothing but that log, and
// a second request in the same thread must get fresh call ids.
func TestWithTheAgent(t *testing.T) {
	reg, err := tools.NewRegistry(lsTool{listing: "go.mod\nmain.go\n"})
	require.NoError(t, err)
	a := agent.New(agent.Config{Model: defaultModel(), Tools: reg})
	j := &journal{}
	ctx := context.Background()

	ask := func(run, text string) []event.Event {
		from := len(j.since(0))
		_, err := j.Append(ctx, event.New("t1", "", event.MessageUser{MessageID: event.NewID(), Text: text}))
		require.NoError(t, err)
		require.NoError(t, a.Run(ctx, agent.Spec{Thread: "t1", Run: run, Input: text}, j, nil))
		return j.since(from)
	}
	callIDs := func(evs []event.Event) []string {
		var ids []string
		for _, e := range evs {
			if p, ok := e.Payload.(event.ToolCallCompleted); ok {
				ids = append(ids, p.CallID)
			}
		}
		return ids
	}

	first := ask("r1", "what files are in the folder?")
	var types []event.Type
	for _, e := range first {
		if len(types) == 0 || types[len(types)-1] != e.Type() {
			types = append(types, e.Type())
		}
	}
	for _, want := range []event.Type{event.TypeToolCallStarted, event.TypeToolCallDelta, event.TypeToolCallCompleted, event.TypeToolExecCompleted, event.TypeUsage} {
		assert.Contains(t, types, want)
	}
	end, ok := first[len(first)-1].Payload.(event.RunCompleted)
	require.True(t, ok, "last event %T", first[len(first)-1].Payload)
	assert.True(t, strings.HasPrefix(end.Reply, "The working folder holds 2 entries:"), "reply %q", end.Reply)
	assert.Contains(t, end.Reply, "go.mod\nmain.go")

	second := ask("r2", "list them again")
	require.IsType(t, event.RunCompleted{}, second[len(second)-1].Payload)
	ids1, ids2 := callIDs(first), callIDs(second)
	require.Len(t, ids1, 1)
	require.Len(t, ids2, 1)
	assert.NotEqual(t, ids1[0], ids2[0], "call ids repeat within the thread")
}
