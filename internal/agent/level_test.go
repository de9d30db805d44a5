package agent_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/agent"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/tools"
	"github.com/agentwire/agentwire/internal/tools/sandbox"
)

// probe is a command tool that records the sandbox level each of its calls
// ran at (tools.LevelFrom), by the call's id.
type probe struct {
	mu     sync.Mutex
	levels map[string]tools.Level
}

type probeArgs struct {
	ID       string `json:"id"`
	ReadOnly bool   `json:"read_only"`
}

func (p *probe) Spec() tools.Spec {
	return tools.Spec{Name: "probe", InputSchema: json.RawMessage(`{"type":"object"}`)}
}

func (p *probe) Classify(raw json.RawMessage) tools.Class {
	var a probeArgs
	_ = json.Unmarshal(raw, &a)
	return tools.Class{Effect: tools.EffectCommand, Command: []string{"probe", a.ID}, Key: "probe-" + a.ID, ReadOnlyCommand: a.ReadOnly}
}

func (p *probe) Run(ctx context.Context, raw json.RawMessage, _ tools.Output) (tools.Result, error) {
	var a probeArgs
	_ = json.Unmarshal(raw, &a)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.levels[a.ID] = tools.LevelFrom(ctx)
	return tools.Result{Content: "probed"}, nil
}

// TestTheVerdictChoosesTheLevel runs a command the classifier knows to
// read and one it does not, and checks the sandbox level each ran at: the
// level follows from how the call was let through — the classifier, a
// person's approval, full-auto — and from the sandbox in force.
func TestTheVerdictChoosesTheLevel(t *testing.T) {
	ro, ww, full := tools.LevelReadOnly, tools.LevelWorkspaceWrite, tools.LevelFullAccess
	for _, tc := range []struct {
		name   string
		policy agent.Policy
		asks   int // approvals to give
		ro, rw tools.Level
	}{
		{"suggest", tools.PolicySuggest, 1, ro, ww},
		{"suggest with an OS sandbox", tools.Judge{Policy: tools.PolicySuggest, Sandbox: sandbox.KindOS}, 1, ro, ww},
		{"auto-edit", tools.PolicyAutoEdit, 1, ro, ww},
		{"full-auto", tools.PolicyFullAuto, 0, ww, ww},
		{"no sandbox available", tools.Judge{Policy: tools.PolicySuggest, Sandbox: sandbox.KindNone}, 2, ww, ww},
		{"full-auto, no sandbox available", tools.Judge{Policy: tools.PolicyFullAuto, Sandbox: sandbox.KindNone}, 2, ww, ww},
		{"the sandbox off", tools.Judge{Policy: tools.PolicySuggest, Sandbox: sandbox.KindOff}, 1, full, full},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, "approval")
			p := &probe{levels: map[string]tools.Level{}}
			reg, err := tools.NewRegistry(p)
			require.NoError(t, err)
			r := e.start(e.agent(agent.Config{Policy: tc.policy, Tools: reg}), "probe the levels", true)
			for n := 1; n <= tc.asks; n++ {
				approve(t, r, n, event.DecisionApprove, "")
			}
			evs := e.wait(r)
			assert.Len(t, payloads[event.ToolApprovalRequested](evs), tc.asks)
			assert.Equal(t, map[string]tools.Level{"ro": tc.ro, "rw": tc.rw}, p.levels)
		})
	}
}
