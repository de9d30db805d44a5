package server

import (
	"context"
	"log/slog"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/config"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/llm"
	"github.com/agentwire/agentwire/internal/protocol"
	"github.com/agentwire/agentwire/internal/runs"
	"github.com/agentwire/agentwire/internal/workflow"
)

// workflowConfig serves testdata/workflows on testdata/workflow.yaml.
func workflowConfig(t *testing.T, args ...string) []string {
	return append([]string{"--workflows", filepath.Join("testdata", "workflows"), "--scenario", filepath.Join("testdata", "workflow.yaml")}, args...)
}

// follow collects a thread's events from after seq after until the end of
// the run started by the post whose id is run, answering each input request
// with the next of answers.
func follow(t *testing.T, ts *testServer, thread string, after int64, run string, answers ...string) []event.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	feed, err := protocol.Subscribe(ctx, ts.core, thread, after)
	require.NoError(t, err)
	defer feed.Close()
	var out []event.Event
	for {
		select {
		case e, ok := <-feed.Events():
			require.True(t, ok, "the feed ended: %v", feed.Err())
			if e.Run != run {
				continue
			}
			out = append(out, e)
			switch p := e.Payload.(type) {
			case event.InputRequested:
				require.NotEmpty(t, answers, "an input request nobody was to answer: %q", p.Prompt)
				require.NoError(t, ts.core.Resolve(ctx, thread, event.Command{Kind: event.CommandInput, ID: p.RequestID, Text: answers[0]}))
				answers = answers[1:]
			case event.RunCompleted, event.RunFailed, event.RunCancelled:
				return out
			}
		case <-ctx.Done():
			t.Fatalf("the run did not end; events so far: %v", out)
		}
	}
}

func speakersOf(evs []event.Event) []string {
	var out []string
	for _, e := range evs {
		if p, ok := e.Payload.(event.AgentSelected); ok {
			out = append(out, p.Agent+"/"+p.Selection)
		}
	}
	return out
}

// TestWorkflowOverAgentchat runs a workflow named in the run options of a
// post through the Core, as a protocol that names workflows does, while an
// agentchat socket watches the thread: both agents speak, in turn, and the
// socket shows their messages.
func TestWorkflowOverAgentchat(t *testing.T) {
	ts := startServer(t, testConfig(t, workflowConfig(t)...), Options{})
	ctx := t.Context()
	c := dial(t, ts.url())
	const thread = "workflow-agentchat"
	c.chat("echo join", thread)
	c.expect(userMessage("echo join"), agentMessage("You said: echo join"))
	seq, err := ts.core.LastSeq(ctx, thread)
	require.NoError(t, err)

	posted, err := ts.core.Post(ctx, thread, runs.Input{Text: "write something", Options: event.RunOptions{Workflow: "pair"}})
	require.NoError(t, err)
	evs := follow(t, ts, thread, seq, posted.Run)
	assert.Equal(t, []string{"writer/round_robin", "critic/round_robin"}, speakersOf(evs))
	var said []string
	for _, e := range evs {
		switch p := e.Payload.(type) {
		case event.MessageCompleted:
			said = append(said, p.Agent+": "+p.Text)
		case event.RunStarted:
			assert.Equal(t, "group", p.Strategy)
		case event.RunCompleted:
			assert.Equal(t, event.ReasonCompleted, p.Reason)
		}
	}
	assert.Equal(t, []string{"writer: Draft: a short text.", "critic: Critique: too short."}, said)
	c.expect(userMessage("write something"), agentMessage("Draft: a short text."), agentMessage("Critique: too short."))

	// The conversation goes on over agentchat, with the default agent.
	c.chat("echo after", thread)
	c.expect(userMessage("echo after"), agentMessage("You said: echo after"))
}

// TestWorkflowManualSelectionAnswered picks the speakers of a manual
// workflow through the Core's input path, as any protocol's answer is.
func TestWorkflowManualSelectionAnswered(t *testing.T) {
	ts := startServer(t, testConfig(t, workflowConfig(t)...), Options{})
	const thread = "workflow-manual"
	posted, err := ts.core.Post(t.Context(), thread, runs.Input{Text: "write", Interactive: true, Options: event.RunOptions{Workflow: "team"}})
	require.NoError(t, err)
	evs := follow(t, ts, thread, 0, posted.Run, "critic", "1", "done")
	assert.Equal(t, []string{"critic/manual", "writer/manual"}, speakersOf(evs))
	end, ok := evs[len(evs)-1].Payload.(event.RunCompleted)
	require.True(t, ok)
	assert.Equal(t, event.RunCompleted{Reason: event.ReasonCompleted, Reply: "Draft: a short text."}, end)
}

// TestWorkflowBuiltinDevTeam runs the shipped example on the built-in
// scripted scenario: no model, no workflow folder.
func TestWorkflowBuiltinDevTeam(t *testing.T) {
	ts := startServer(t, testConfig(t, "--scenario", ""), Options{})
	const thread = "workflow-dev-team"
	posted, err := ts.core.Post(t.Context(), thread, runs.Input{Text: "add a feature", Options: event.RunOptions{Workflow: "dev-team"}})
	require.NoError(t, err)
	evs := follow(t, ts, thread, 0, posted.Run)
	assert.Equal(t, []string{"planner/round_robin", "coder/round_robin", "reviewer/round_robin"}, speakersOf(evs))
	end, ok := evs[len(evs)-1].Payload.(event.RunCompleted)
	require.True(t, ok, "%T", evs[len(evs)-1].Payload)
	assert.Equal(t, event.ReasonCompleted, end.Reason)
	assert.Contains(t, end.Reply, "Review:")
}

func TestWorkflowRefused(t *testing.T) {
	ts := startServer(t, testConfig(t, workflowConfig(t)...), Options{})
	ctx := t.Context()
	for _, tc := range []struct {
		opts event.RunOptions
		code protocol.Code
		is   error
	}{
		{event.RunOptions{Workflow: "missing"}, protocol.CodeNotFound, workflow.ErrNotFound},
		{event.RunOptions{Workflow: "../workflows/pair"}, protocol.CodeNotFound, workflow.ErrNotFound},
		{event.RunOptions{Workflow: "broken"}, protocol.CodeInvalid, workflow.ErrInvalid},
		{event.RunOptions{Workflow: "pair", Strategy: "react"}, protocol.CodeInvalid, nil},
	} {
		_, err := ts.core.Post(ctx, "workflow-refused", runs.Input{Text: "hi", Options: tc.opts})
		require.Error(t, err, "%+v", tc.opts)
		assert.Equal(t, tc.code, protocol.AsError(err).Code, "%+v: %v", tc.opts, err)
		if tc.is != nil {
			assert.ErrorIs(t, err, tc.is, "%+v", tc.opts)
		}
	}
	_, err := ts.core.Post(ctx, "workflow-refused", runs.Input{Text: "hi", Options: event.RunOptions{Workflow: "broken"}})
	assert.Contains(t, protocol.AsError(err).Message, "broken.yaml: line 3: /agents/0/tools")
	_, err = ts.core.Post(ctx, "workflow-refused", runs.Input{Text: "hi", Options: event.RunOptions{Workflow: "missing"}})
	assert.Contains(t, protocol.AsError(err).Message, "broken, default, dev-team, pair, team", "the message lists the workflows on offer")
	assert.Empty(t, ts.history("workflow-refused"), "a refused post records nothing")
}

// TestWorkflowsInEnv checks that adapters get the server's workflows.
func TestWorkflowsInEnv(t *testing.T) {
	var got *workflow.Catalog
	reg := []protocol.Registration{{Name: "probe", New: func(env protocol.Env) (protocol.Adapter, error) {
		got = env.Workflows
		return probe{}, nil
	}}}
	startServer(t, testConfig(t, workflowConfig(t)...), Options{Protocols: reg})
	require.NotNil(t, got)
	w, err := got.Lookup("team")
	require.NoError(t, err)
	assert.Equal(t, workflow.Manual, w.Selection)
}

func TestWorkflowsFolderMustExist(t *testing.T) {
	cfg := testConfig(t, "--workflows", filepath.Join(t.TempDir(), "missing"))
	_, err := New(t.Context(), cfg, nil, Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--workflows")
}

type probe struct{}

func (probe) Mount(*http.ServeMux, bool)         {}
func (probe) Endpoints() []protocol.Endpoint     { return nil }
func (probe) Shutdown(ctx context.Context) error { return nil }

// TestGroupStrategyWithoutWorkflow runs strategy group with no workflow
// named: the default workflow, one assistant.
func TestGroupStrategyWithoutWorkflow(t *testing.T) {
	ts := startServer(t, testConfig(t, workflowConfig(t)...), Options{})
	const thread = "workflow-group-default"
	posted, err := ts.core.Post(t.Context(), thread, runs.Input{Text: "echo hi", Options: event.RunOptions{Strategy: "group"}})
	require.NoError(t, err)
	evs := follow(t, ts, thread, 0, posted.Run)
	assert.Equal(t, []string{"assistant/only"}, speakersOf(evs))
	assert.Equal(t, event.RunCompleted{Reason: event.ReasonCompleted, Reply: "You said: echo hi"}, evs[len(evs)-1].Payload)
}

func TestModelNamed(t *testing.T) {
	cfg := testConfig(t)
	base, _, err := newModel(cfg, nil, nil)
	require.NoError(t, err)
	named := modelNamed(cfg, nil, base, nil, nil)
	m, err := named("any-model")
	require.NoError(t, err)
	assert.Same(t, base, m, "the scripted model plays its scenario whatever the name")

	// A vendor's model, made by its provider for each name.
	var made []string
	providers := map[string]ModelProvider{"openai": func(c config.Config, _ *slog.Logger) (llm.Model, string, error) {
		made = append(made, c.Model)
		return &namedModel{name: c.Model}, "openai " + c.Model, nil
	}}
	cfg = testConfig(t, "--llm", "openai", "--model", "base-model", "--scenario", "")
	base, desc, err := newModel(cfg, nil, providers)
	require.NoError(t, err)
	assert.Equal(t, "openai base-model", desc)
	named = modelNamed(cfg, nil, base, nil, providers)
	m, err = named("small-model")
	require.NoError(t, err)
	assert.Equal(t, "small-model", m.Name())
	again, err := named("small-model")
	require.NoError(t, err)
	assert.Same(t, m, again, "one client per name")
	m, err = named("base-model")
	require.NoError(t, err)
	assert.Same(t, base, m)
	assert.Equal(t, []string{"base-model", "small-model"}, made)
}

// A server built without a vendor's model refuses a configuration that
// names it, saying what is missing.
func TestModelNotBuiltIn(t *testing.T) {
	_, err := New(t.Context(), testConfig(t, "--llm", "anthropic", "--scenario", ""), nil, Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the anthropic model is not built into this server")
}

// namedModel is a model that only has a name.
type namedModel struct {
	llm.Model
	name string
}

func (m *namedModel) Name() string { return m.name }
