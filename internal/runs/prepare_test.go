package runs_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/agent"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/runs"
	"github.com/agentwire/agentwire/internal/tools"
)

// preparations is a Config.Prepare that names each spec it makes (its
// System, "spec N") and counts how often each was released.
type preparations struct {
	mu       sync.Mutex
	made     int
	released map[string]int
	// started are the specs of the runs started, by run, and whether
	// each was released when its run started.
	started []startedWith
}

type startedWith struct {
	run, spec string
	released  bool
}

func newPreparations(e *env) *preparations {
	p := &preparations{released: map[string]int{}}
	e.prepare = p.prepare
	e.wrap = func(r runs.Runner) runs.Runner { return preparedRunner{r, p} }
	return p
}

func (p *preparations) prepare(_ context.Context, _ string, opts event.RunOptions) (agent.Spec, func(), error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.made++
	name := fmt.Sprintf("spec %d", p.made)
	return agent.Spec{Strategy: opts.Strategy, System: name}, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.released[name]++
	}, nil
}

// counts returns how many specs were made and released.
func (p *preparations) counts() (made, released int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, n := range p.released {
		released += n
	}
	return p.made, released
}

// preparedRunner records the spec each run starts with.
type preparedRunner struct {
	runs.Runner
	p *preparations
}

func (r preparedRunner) Run(ctx context.Context, spec agent.Spec, j agent.Journal, inbox *agent.Inbox) error {
	r.p.mu.Lock()
	r.p.started = append(r.p.started, startedWith{run: spec.Run, spec: spec.System, released: r.p.released[spec.System] > 0})
	r.p.mu.Unlock()
	return r.Runner.Run(ctx, spec, j, inbox)
}

// TestPostIsPreparedOnce posts to an idle thread and then, while its run
// waits for an approval, to the same thread again: the first post's
// options are prepared once, and its run starts with that spec; the
// queued post's once when it is posted (the owner, here, does not prepare
// it again) and once when it starts.
func TestPostIsPreparedOnce(t *testing.T) {
	e := newEnv(t)
	p := newPreparations(e)
	e.newManager()

	first := e.post("t1", "touch it")
	call := e.log.waitFor(t, 1, approvalOf(first.Run)).Payload.(event.ToolApprovalRequested)
	made, _ := p.counts()
	assert.Equal(t, 1, made, "specs made for a post that started its run")

	second := e.post("t1", "second")
	require.True(t, second.Queued)
	made, _ = p.counts()
	assert.Equal(t, 2, made, "specs made once the second post was queued")

	require.NoError(t, e.m.Resolve(t.Context(), "t1", event.Command{Kind: event.CommandApprove, ID: call.CallID, Decision: event.DecisionApprove}))
	e.log.waitFor(t, 1, ended(second.Run))
	require.Eventually(t, func() bool {
		made, released := p.counts()
		return made == 3 && released == 3
	}, testTimeout, time.Millisecond, "a spec made for the queued input's start, and every spec released")
	p.mu.Lock()
	defer p.mu.Unlock()
	assert.Equal(t, []startedWith{{run: first.Run, spec: "spec 1"}, {run: second.Run, spec: "spec 3"}}, p.started,
		"each run starts with the spec made for it, not released")
}

// TestRunStartedAgainKeepsItsSpec undoes a run started ahead of its
// commit (another event is committed in between) so that it starts again:
// the post is still prepared once, both runs have that spec, and it is
// released once, when both have ended.
func TestRunStartedAgainKeepsItsSpec(t *testing.T) {
	e := newEnv(t)
	p := newPreparations(e)
	model, _ := seeModel(t, e, tools.PolicySuggest)
	e.log.beforeMessage = func(msg event.Event) error {
		if err := waitClosed(model.answered, "the run started ahead did not call the model"); err != nil {
			return err
		}
		_, err := e.store.Append(context.Background(), "t1",
			event.New("t1", "other", event.MessageUser{MessageID: "m-other", Text: "in between"}))
		return err
	}
	post := e.post("t1", "hello")
	e.log.waitFor(t, 1, ended(post.Run))
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	e.m.Shutdown(ctx) // waits for both runs

	assert.Equal(t, []string{"hello", "in between | hello"}, model.sent(), "the run was started again")
	made, released := p.counts()
	assert.Equal(t, 1, made, "specs made")
	assert.Equal(t, 1, released, "releases of the spec")
	p.mu.Lock()
	defer p.mu.Unlock()
	assert.Equal(t, []startedWith{{run: post.Run, spec: "spec 1"}, {run: post.Run, spec: "spec 1"}}, p.started,
		"the undone run and the run started again, with the post's spec, not released")
}

// specRunner records the spec of every run before running it.
type specRunner struct {
	runs.Runner
	mu    sync.Mutex
	specs []agent.Spec
}

func (s *specRunner) Run(ctx context.Context, spec agent.Spec, j agent.Journal, inbox *agent.Inbox) error {
	s.mu.Lock()
	s.specs = append(s.specs, spec)
	s.mu.Unlock()
	return s.Runner.Run(ctx, spec, j, inbox)
}

// TestPrepareTurnsOptionsIntoTheRunsSpec posts with run options: the
// owner's Prepare turns them into the run's spec, what it cannot honour is
// refused (nothing is committed), and whatever Prepare opened (to check a
// post, or for a run) is released.
func TestPrepareTurnsOptionsIntoTheRunsSpec(t *testing.T) {
	e := newEnv(t)
	var (
		mu               sync.Mutex
		opened, released int
	)
	prepare := func(_ context.Context, thread string, opts event.RunOptions) (agent.Spec, func(), error) {
		if opts.Folder == "../outside" {
			return agent.Spec{}, nil, errors.New("the folder is outside the working folder")
		}
		mu.Lock()
		opened++
		mu.Unlock()
		return agent.Spec{Strategy: opts.Strategy, System: "You work in " + opts.Folder + "."}, func() {
			mu.Lock()
			released++
			mu.Unlock()
		}, nil
	}
	rec := &specRunner{Runner: e.agent}
	m := runs.New(runs.Config{Log: e.log, Claims: e.store, Bus: e.bus, Runner: rec, Node: "node-p", Prepare: prepare})
	t.Cleanup(func() { m.Shutdown(t.Context()) })

	_, err := m.Post(t.Context(), "t1", runs.Input{Text: "hello", Options: event.RunOptions{Folder: "../outside"}})
	require.Error(t, err)
	assert.Empty(t, e.events("t1", nil), "a refused post commits nothing")

	first, err := m.Post(t.Context(), "t1", runs.Input{Text: "touch it", Interactive: true, Options: event.RunOptions{Strategy: "react", Folder: "a"}})
	require.NoError(t, err)
	e.log.waitFor(t, 1, approvalOf(first.Run))
	_, err = m.Post(t.Context(), "t1", runs.Input{Text: "queued", Options: event.RunOptions{Folder: "../outside"}})
	require.Error(t, err, "queued input is prepared when it is taken, and refused then")
	dropped, err := m.Post(t.Context(), "t1", runs.Input{Text: "dropped", Options: event.RunOptions{Folder: "b"}})
	require.NoError(t, err)
	require.True(t, dropped.Queued)
	require.NoError(t, m.Cancel(t.Context(), "t1"), "cancelling drops the queued input")
	e.log.waitFor(t, 1, ended(first.Run))

	rec.mu.Lock()
	require.Len(t, rec.specs, 1)
	assert.Equal(t, "react", rec.specs[0].Strategy)
	assert.Equal(t, "You work in a.", rec.specs[0].System)
	assert.Equal(t, first.Run, rec.specs[0].Run)
	rec.mu.Unlock()
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return opened > 0 && released == opened
	}, testTimeout, time.Millisecond, "everything Prepare opened is released")
}
