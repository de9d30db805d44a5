package builtin_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/tools"
	"github.com/agentwire/agentwire/internal/tools/builtin"
	"github.com/agentwire/agentwire/internal/tools/sandbox"
)

// person answers from a script and records what it was asked.
type person struct {
	answer string
	data   json.RawMessage
	err    error
	asked  []tools.InputRequest
	shown  []tools.UIRequest
}

func (p *person) Ask(_ context.Context, req tools.InputRequest) (string, error) {
	p.asked = append(p.asked, req)
	return p.answer, p.err
}

func (p *person) RequestUI(_ context.Context, req tools.UIRequest) (json.RawMessage, error) {
	p.shown = append(p.shown, req)
	return p.data, p.err
}

func TestAskUser(t *testing.T) {
	e := newEnv(t, builtin.Options{})

	res := e.call("ask_user", map[string]any{"prompt": "Which branch?"})
	require.Equal(t, tools.Result{Content: "no person is available to answer", IsError: true}, res)

	p := &person{answer: "main"}
	ctx := tools.WithAsker(t.Context(), p)
	res, _, err := e.callCtx(ctx, "ask_user", map[string]any{"prompt": "Which branch?"})
	require.NoError(t, err)
	require.Equal(t, tools.Result{Content: "main"}, res)
	res, _, err = e.callCtx(ctx, "ask_user", map[string]any{"prompt": "Token?", "secret": true, "timeout_seconds": 30})
	require.NoError(t, err)
	require.Equal(t, tools.Result{Content: "main"}, res)
	require.Equal(t, []tools.InputRequest{{Prompt: "Which branch?"}, {Prompt: "Token?", Secret: true, TimeoutSeconds: 30}}, p.asked)

	p.err = tools.ErrInputTimedOut
	_, _, err = e.callCtx(ctx, "ask_user", map[string]any{"prompt": "Still there?", "timeout_seconds": 1})
	require.ErrorIs(t, err, tools.ErrInputTimedOut)

	res, _, err = e.callCtx(ctx, "ask_user", map[string]any{})
	require.NoError(t, err)
	require.True(t, res.IsError)

	require.Equal(t, tools.Class{Effect: tools.EffectRead}, e.classify("ask_user", map[string]any{"prompt": "x"}))
}

func TestUI(t *testing.T) {
	e := newEnv(t, builtin.Options{})
	res := e.call("ui", map[string]any{"component": "confirm", "payload": map[string]any{"text": "Deploy?"}})
	require.Equal(t, tools.Result{Content: "no person is available to answer", IsError: true}, res)

	p := &person{data: json.RawMessage(`{"confirmed":true}`)}
	res, _, err := e.callCtx(tools.WithAsker(t.Context(), p), "ui", map[string]any{"component": "confirm", "payload": map[string]any{"text": "Deploy?"}})
	require.NoError(t, err)
	require.Equal(t, tools.Result{Content: `{"confirmed":true}`}, res)
	require.Equal(t, []tools.UIRequest{{Component: "confirm", Payload: json.RawMessage(`{"text":"Deploy?"}`)}}, p.shown)
}

func TestTodo(t *testing.T) {
	e := newEnv(t, builtin.Options{})
	require.Equal(t, "(the to-do list is empty)", e.call("todo_read", nil).Content)
	res := e.call("todo_write", map[string]any{"todos": []map[string]any{
		{"id": "1", "content": "read the code", "status": "completed"},
		{"content": "write the fix", "status": "in_progress", "priority": "high"},
		{"content": "run the tests", "status": "pending"},
	}})
	want := "[x] read the code (id 1)\n[~] write the fix [high]\n[ ] run the tests"
	require.Equal(t, tools.Result{Content: want}, res)
	require.Equal(t, want, e.call("todo_read", map[string]any{}).Content)

	res = e.call("todo_write", map[string]any{"todos": []map[string]any{{"content": "x", "status": "done"}}})
	require.True(t, res.IsError)
	require.Equal(t, want, e.call("todo_read", nil).Content, "a rejected write changes nothing")

	// Another registry has its own list.
	require.Equal(t, "(the to-do list is empty)", newEnv(t, builtin.Options{}).call("todo_read", nil).Content)
}

func TestBatch(t *testing.T) {
	e := newEnv(t, builtin.Options{Sandbox: sandbox.Off()})
	calls := func(cs ...map[string]any) map[string]any { return map[string]any{"calls": cs} }
	read := map[string]any{"tool": "read", "args": map[string]any{"path": "a.txt"}}
	ls := map[string]any{"tool": "bash", "args": map[string]any{"command": "ls sub"}}
	write := map[string]any{"tool": "write_file", "args": map[string]any{"path": "w.txt", "content": "w"}}
	rm := map[string]any{"tool": "bash", "args": map[string]any{"command": "rm w.txt"}}

	res := e.call("batch", calls(read, ls, map[string]any{"tool": "nope", "args": map[string]any{}}, map[string]any{"tool": "batch", "args": calls(read)}))
	require.False(t, res.IsError)
	require.Equal(t, "[1] read (ok):\nalpha\nbeta\ngamma\n\n\n[2] bash (ok):\nb.go\nup\n\n[3] nope (error):\nunknown tool \"nope\"\n\n[4] batch (error):\na batch cannot contain a batch", res.Content)

	// The policy judges every part.
	c := e.classify("batch", calls(read, ls))
	require.Len(t, c.Parts, 2)
	require.Equal(t, tools.EffectCommand, c.Effect)
	require.True(t, c.ReadOnlyCommand)
	require.Equal(t, []string{"ls", "sub"}, c.Command)
	require.Equal(t, tools.Run, tools.PolicySuggest.Decide(c, nil))

	c = e.classify("batch", calls(read, write, ls))
	require.False(t, c.ReadOnlyCommand)
	require.Equal(t, "write_file", c.Key)
	require.Equal(t, tools.Ask, tools.PolicySuggest.Decide(c, nil))
	require.Equal(t, tools.Run, tools.PolicyAutoEdit.Decide(c, nil))
	require.Equal(t, tools.Refuse, tools.PolicyReadOnly.Decide(c, nil))

	c = e.classify("batch", calls(write, rm))
	require.Equal(t, "", c.Key, "parts with different keys cannot be approved for good together")
	require.Equal(t, tools.Ask, tools.PolicyAutoEdit.Decide(c, func(k string) bool { return k == "write_file" }))
	require.Equal(t, tools.Run, tools.PolicyAutoEdit.Decide(c, func(k string) bool { return k == "rm" }))
}
