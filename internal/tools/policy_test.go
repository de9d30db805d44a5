package tools_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/tools"
	"github.com/agentwire/agentwire/internal/tools/sandbox"
)

func TestParsePolicy(t *testing.T) {
	for in, want := range map[string]tools.Policy{
		"": tools.PolicySuggest, "suggest": tools.PolicySuggest, "auto-edit": tools.PolicyAutoEdit,
		"auto_edit": tools.PolicyAutoEdit, "Full-Auto": tools.PolicyFullAuto, "read-only": tools.PolicyReadOnly,
		"readonly": tools.PolicyReadOnly,
	} {
		got, err := tools.ParsePolicy(in)
		if err != nil || got != want {
			t.Errorf("ParsePolicy(%q) = %q, %v, want %q", in, got, err, want)
		}
	}
	if _, err := tools.ParsePolicy("yolo"); err == nil {
		t.Errorf("ParsePolicy(yolo) = nil error, want one")
	}
}

func TestPolicyMatrix(t *testing.T) {
	read := tools.Class{Effect: tools.EffectRead}
	edit := tools.Class{Effect: tools.EffectEdit, Key: "apply_patch"}
	network := tools.Class{Effect: tools.EffectNetwork, Key: "web_fetcher"}
	roCmd := tools.Class{Effect: tools.EffectCommand, Key: "git", Command: []string{"git", "status"}, ReadOnlyCommand: true}
	cmd := tools.Class{Effect: tools.EffectCommand, Key: "rm", Command: []string{"rm", "-rf", "x"}}
	unkeyed := tools.Class{Effect: tools.EffectCommand, Command: []string{"rm", "x", ";", "make"}}
	unknown := tools.Class{}

	const R, A, X = tools.Run, tools.Ask, tools.Refuse
	classes := []tools.Class{read, edit, network, roCmd, cmd, unkeyed, unknown}
	names := []string{"read", "edit", "network", "read-only command", "command", "unkeyed command", "unknown"}
	// want[policy] = verdicts for classes, without and with every key remembered.
	want := map[tools.Policy][2][]tools.Verdict{
		tools.PolicySuggest:  {{R, A, A, R, A, A, A}, {R, R, R, R, R, A, A}},
		tools.PolicyAutoEdit: {{R, R, R, R, A, A, A}, {R, R, R, R, R, A, A}},
		tools.PolicyFullAuto: {{R, R, R, R, R, R, R}, {R, R, R, R, R, R, R}},
		tools.PolicyReadOnly: {{R, X, X, X, X, X, X}, {R, X, X, X, X, X, X}},
	}
	remember := []func(string) bool{nil, func(k string) bool { return k != "" }}
	for p, rows := range want {
		for m, row := range rows {
			for i, c := range classes {
				got := p.Decide(c, remember[m])
				if got != row[i] {
					t.Errorf("%s.Decide(%s, remembered=%v) = %v, want %v", p, names[i], m == 1, got, row[i])
				}
				if p.NeedsApproval(c, remember[m]) != (row[i] == tools.Ask) {
					t.Errorf("%s.NeedsApproval(%s, remembered=%v) disagrees with Decide", p, names[i], m == 1)
				}
			}
		}
	}

	// Remembering one key does not approve another.
	onlyGit := func(k string) bool { return k == "git" }
	require.Equal(t, tools.Ask, tools.PolicySuggest.Decide(cmd, onlyGit))
	require.Equal(t, tools.Run, tools.PolicySuggest.Decide(tools.Class{Effect: tools.EffectCommand, Key: "git"}, onlyGit))
}

// TestPolicyLevel checks the sandbox level each way of running a call
// gives it: read-only for a command the classifier let through, and
// workspace-write for one a person approved (now, or for good) or that
// full-auto runs.
func TestPolicyLevel(t *testing.T) {
	ro := tools.LevelReadOnly
	ww := tools.LevelWorkspaceWrite
	roCmd := tools.Class{Effect: tools.EffectCommand, Key: "ls", ReadOnlyCommand: true}
	cmd := tools.Class{Effect: tools.EffectCommand, Key: "make"}
	always := func(k string) bool { return k == "make" }
	for _, tc := range []struct {
		policy     tools.Policy
		class      tools.Class
		approved   bool
		remembered func(string) bool
		want       tools.Level
	}{
		{tools.PolicySuggest, roCmd, false, nil, ro},
		{tools.PolicySuggest, roCmd, false, func(string) bool { return true }, ro},
		{tools.PolicySuggest, cmd, true, nil, ww},
		{tools.PolicySuggest, cmd, false, always, ww},
		{tools.PolicySuggest, cmd, false, nil, ro},
		{tools.PolicyAutoEdit, roCmd, false, nil, ro},
		{tools.PolicyAutoEdit, cmd, true, nil, ww},
		{tools.PolicyFullAuto, roCmd, false, nil, ww},
		{tools.PolicyFullAuto, cmd, false, nil, ww},
		{tools.PolicySuggest, tools.Class{Effect: tools.EffectCommand, Parts: []tools.Class{roCmd, cmd}}, false, always, ww},
		{tools.PolicySuggest, tools.Class{Effect: tools.EffectCommand, Parts: []tools.Class{roCmd, roCmd}}, false, nil, ro},
	} {
		if got := tc.policy.Level(tc.class, tc.approved, tc.remembered); got != tc.want {
			t.Errorf("%s.Level(%+v, approved=%v) = %v, want %v", tc.policy, tc.class, tc.approved, got, tc.want)
		}
	}
	if got := (tools.Judge{Policy: tools.PolicySuggest, Sandbox: sandbox.KindOff}).Level(roCmd, false, nil); got != tools.LevelFullAccess {
		t.Errorf("Judge with the sandbox off: Level = %v, want %v", got, tools.LevelFullAccess)
	}
	if got := (tools.Judge{Policy: tools.PolicySuggest, Sandbox: sandbox.KindOS}).Level(roCmd, false, nil); got != ro {
		t.Errorf("Judge with an OS sandbox: Level = %v, want %v", got, ro)
	}
	if got := tools.LevelFrom(t.Context()); got != ro {
		t.Errorf("LevelFrom(a context with no level) = %v, want %v", got, ro)
	}
	if got := tools.LevelFrom(tools.WithLevel(t.Context(), ww)); got != ww {
		t.Errorf("LevelFrom(WithLevel(%v)) = %v", ww, got)
	}
}

// TestJudgeWithoutSandbox: with no OS sandbox every command asks, whatever
// the policy and the approve-always memory say; other calls are judged as
// the policy judges them. With one, or with the sandbox off on purpose,
// the policy's verdict stands.
func TestJudgeWithoutSandbox(t *testing.T) {
	roCmd := tools.Class{Effect: tools.EffectCommand, Key: "ls", ReadOnlyCommand: true}
	cmd := tools.Class{Effect: tools.EffectCommand, Key: "make"}
	read := tools.Class{Effect: tools.EffectRead}
	edit := tools.Class{Effect: tools.EffectEdit, Key: "write_file"}
	all := func(string) bool { return true }
	for _, p := range []tools.Policy{tools.PolicySuggest, tools.PolicyAutoEdit, tools.PolicyFullAuto, tools.PolicyReadOnly} {
		none := tools.Judge{Policy: p} // the zero Sandbox: none available
		for _, c := range []tools.Class{roCmd, cmd, {Effect: tools.EffectCommand, Parts: []tools.Class{read, roCmd}}} {
			want := tools.Ask
			if p == tools.PolicyReadOnly {
				want = tools.Refuse
			}
			if got := none.Decide(c, all); got != want {
				t.Errorf("Judge{%s, none}.Decide(%+v) = %v, want %v", p, c, got, want)
			}
		}
		for _, c := range []tools.Class{read, edit} {
			if got, want := none.Decide(c, nil), p.Decide(c, nil); got != want {
				t.Errorf("Judge{%s, none}.Decide(%+v) = %v, want the policy's %v", p, c, got, want)
			}
		}
		for _, k := range []sandbox.Kind{sandbox.KindOS, sandbox.KindOff} {
			j := tools.Judge{Policy: p, Sandbox: k}
			for _, c := range []tools.Class{roCmd, cmd, read, edit} {
				if got, want := j.Decide(c, nil), p.Decide(c, nil); got != want {
					t.Errorf("Judge{%s, %s}.Decide(%+v) = %v, want the policy's %v", p, k, c, got, want)
				}
			}
		}
	}
}

func TestPolicyParts(t *testing.T) {
	edit := tools.Class{Effect: tools.EffectEdit, Key: "write_file"}
	roCmd := tools.Class{Effect: tools.EffectCommand, Key: "ls", ReadOnlyCommand: true}
	read := tools.Class{Effect: tools.EffectRead}
	batch := tools.Class{Effect: tools.EffectCommand, Parts: []tools.Class{read, edit, roCmd}}
	require.Equal(t, tools.Ask, tools.PolicySuggest.Decide(batch, nil))
	require.Equal(t, tools.Run, tools.PolicySuggest.Decide(batch, func(k string) bool { return k == "write_file" }))
	require.Equal(t, tools.Run, tools.PolicyAutoEdit.Decide(batch, nil))
	require.Equal(t, tools.Refuse, tools.PolicyReadOnly.Decide(batch, nil))
	require.Equal(t, tools.Run, tools.PolicyReadOnly.Decide(tools.Class{Effect: tools.EffectRead, Parts: []tools.Class{read, read}}, nil))
}

// fake is a tool of a fixed bound.
type fake struct {
	name  string
	bound tools.Effect
}

func (f fake) Spec() tools.Spec {
	return tools.Spec{Name: f.name, InputSchema: json.RawMessage(`{"type":"object"}`)}
}
func (f fake) Classify(json.RawMessage) tools.Class { return tools.Class{Effect: f.bound} }
func (f fake) Run(context.Context, json.RawMessage, tools.Output) (tools.Result, error) {
	return tools.Result{Content: f.name}, nil
}
func (f fake) MaxEffect() tools.Effect { return f.bound }

func TestRegistry(t *testing.T) {
	r, err := tools.NewRegistry(fake{"zeta", tools.EffectRead}, fake{"alpha", tools.EffectEdit}, fake{"bash", tools.EffectCommand},
		fake{"fetch", tools.EffectNetwork})
	require.NoError(t, err)
	require.ErrorContains(t, r.Register(fake{"alpha", tools.EffectRead}), "already registered")
	for _, bad := range []string{"", "has space", "dots.not.ok", string(make([]byte, 65))} {
		require.Error(t, r.Register(fake{bad, tools.EffectRead}), "Register(%q)", bad)
	}
	require.NoError(t, r.Register(fake{"mid", tools.EffectRead}))

	var names []string
	for _, s := range r.Specs() {
		names = append(names, s.Name)
	}
	require.Equal(t, []string{"alpha", "bash", "fetch", "mid", "zeta"}, names)
	require.True(t, slices.IsSorted(r.Names()))

	got, ok := r.Get("mid")
	require.True(t, ok)
	res, err := got.Run(context.Background(), nil, nil)
	require.NoError(t, err)
	require.Equal(t, "mid", res.Content)
	_, ok = r.Get("nope")
	require.False(t, ok)

	require.Equal(t, []string{"mid", "zeta"}, r.Filter(tools.PolicyReadOnly).Names())
	for _, p := range []tools.Policy{tools.PolicySuggest, tools.PolicyAutoEdit, tools.PolicyFullAuto} {
		require.Equal(t, r.Names(), r.Filter(p).Names(), "Filter(%s)", p)
	}
}

func TestMaxEffectDefaultsToCommand(t *testing.T) {
	type plain struct{ tools.Tool }
	require.Equal(t, tools.EffectCommand, tools.MaxEffect(plain{}))
	require.Equal(t, tools.EffectRead, tools.MaxEffect(fake{"x", tools.EffectRead}))
}
