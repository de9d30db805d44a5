package runs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/agent"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/llm"
	"github.com/agentwire/agentwire/internal/runs"
	"github.com/agentwire/agentwire/internal/store"
	"github.com/agentwire/agentwire/internal/tools"
)

// seenModel is the scripted model, reporting its calls: the requests it
// was sent, the first call, and the end of the first call's reply.
type seenModel struct {
	llm.Model

	mu       sync.Mutex
	requests []llm.Request

	called, answered         chan struct{}
	calledOnce, answeredOnce sync.Once
}

func (s *seenModel) Stream(ctx context.Context, req llm.Request) iter.Seq2[llm.Chunk, error] {
	s.mu.Lock()
	s.requests = append(s.requests, req)
	s.mu.Unlock()
	s.calledOnce.Do(func() { close(s.called) })
	return func(yield func(llm.Chunk, error) bool) {
		for c, err := range s.Model.Stream(ctx, req) {
			if !yield(c, err) {
				return
			}
		}
		s.answeredOnce.Do(func() { close(s.answered) })
	}
}

// sent returns the text of each request's messages.
func (s *seenModel) sent() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, req := range s.requests {
		var texts []string
		for _, m := range req.Messages {
			texts = append(texts, m.Content)
		}
		out = append(out, strings.Join(texts, " | "))
	}
	return out
}

// ranTools is the built-in toolbox, counting the calls it starts.
type ranTools struct {
	agent.Toolbox
	ran atomic.Int32
}

func (r *ranTools) Get(name string) (tools.Tool, bool) {
	t, ok := r.Toolbox.Get(name)
	if !ok {
		return nil, false
	}
	return ranTool{t, &r.ran}, true
}

type ranTool struct {
	tools.Tool
	ran *atomic.Int32
}

func (t ranTool) Run(ctx context.Context, args json.RawMessage, out tools.Output) (tools.Result, error) {
	t.ran.Add(1)
	return t.Tool.Run(ctx, args, out)
}

// seeModel gives e's Manager an agent whose model is e's, seen (seenModel),
// under policy, and whose tools are e's, counting their calls.
func seeModel(t *testing.T, e *env, policy tools.Policy) (*seenModel, *ranTools) {
	t.Helper()
	model := &seenModel{Model: e.model, called: make(chan struct{}), answered: make(chan struct{})}
	box := &ranTools{Toolbox: e.tools}
	e.agent = agent.New(agent.Config{Model: model, Tools: box, Policy: policy, LiveDeltas: time.Millisecond})
	e.newManager()
	return model, box
}

// waitClosed waits for ch, or fails with what.
func waitClosed(ch <-chan struct{}, what string) error {
	select {
	case <-ch:
		return nil
	case <-time.After(testTimeout):
		return errors.New(what)
	}
}

// TestRunStartsAheadOfItsCommit holds back the commit of a post's message
// until the model has been called: the run reads its history and calls
// the model while the commit is made, and nothing it writes is committed
// before the message.
func TestRunStartsAheadOfItsCommit(t *testing.T) {
	claimModes(t, func(t *testing.T, e *env) {
		model, _ := seeModel(t, e, tools.PolicySuggest)
		e.log.beforeMessage = func(msg event.Event) error {
			if err := waitClosed(model.called, "the model was not called before the message's commit"); err != nil {
				return err
			}
			e.log.mu.Lock()
			defer e.log.mu.Unlock()
			for _, ev := range e.log.committed {
				assert.NotEqual(t, msg.Run, ev.Run, "%s committed before the run's message", ev.Type())
			}
			assert.Empty(t, e.log.previewed, "previews sent before the run's message was committed")
			return nil
		}
		p := e.post("t1", "hello")
		end := e.log.waitFor(t, 1, ended(p.Run))
		assert.Equal(t, event.RunCompleted{Reason: "final_answer", Reply: "Echo: hello"}, end.Payload)
		msg := e.log.waitFor(t, 1, ofType(event.TypeMessageUser))
		e.log.mu.Lock()
		previewed := e.log.previewed
		e.log.mu.Unlock()
		require.NotEmpty(t, previewed, "the run previews its start and its text")
		assert.Equal(t, event.TypeRunStarted, previewed[0].Type())
		for _, pv := range previewed {
			assert.GreaterOrEqual(t, pv.Preview, msg.Seq, "a preview placed before the run's message")
		}
		assert.Equal(t, []string{"message.user r", "run.started r", "run.completed r"}, e.events("t1", map[string]string{p.Run: "r"}))
		assert.Equal(t, []string{"hello"}, model.sent(), "the model's one call, with the user's message")
	})
}

// TestRunStartedAheadStartsAgain commits another event to the thread
// after the run started ahead read its history: that run is undone
// (nothing of it is committed) and the run starts again, with the event
// in its history.
func TestRunStartedAheadStartsAgain(t *testing.T) {
	claimModes(t, func(t *testing.T, e *env) {
		model, _ := seeModel(t, e, tools.PolicySuggest)
		e.log.beforeMessage = func(msg event.Event) error {
			if err := waitClosed(model.answered, "the run started ahead did not call the model"); err != nil {
				return err
			}
			_, err := e.store.Append(context.Background(), "t1",
				event.New("t1", "other", event.MessageUser{MessageID: "m-other", Text: "in between"}))
			return err
		}
		p := e.post("t1", "hello")
		end := e.log.waitFor(t, 1, ended(p.Run))
		assert.Equal(t, event.RunCompleted{Reason: "final_answer", Reply: "Echo: hello"}, end.Payload)
		assert.Equal(t, []string{"message.user other", "message.user r", "run.started r", "run.completed r"},
			e.events("t1", map[string]string{p.Run: "r", "other": "other"}))
		assert.Equal(t, []string{"hello", "in between | hello"}, model.sent(),
			"the undone run's call without the event in between, the run's with it")
		for result, want := range map[string]float64{"undone": 1, "restarted": 1, "committed": 0} {
			got, _ := e.metrics.Sample("agentwire_runs_ahead_total", map[string]string{"result": result})
			assert.Equal(t, want, got, "runs ahead %s", result)
		}
	})
}

// TestRunStartedAheadOfAClaimItLoses posts to a thread another node has
// claimed, with a model that asks for a command the policy runs without
// asking: the run started ahead is undone once the claim fails, commits
// nothing and runs no command, and the post waits in the thread's queue.
func TestRunStartedAheadOfAClaimItLoses(t *testing.T) {
	e := newEnv(t)
	model, box := seeModel(t, e, tools.PolicyFullAuto)
	require.NoError(t, e.store.ClaimRun(t.Context(), store.RunClaim{Thread: "t1", Run: "theirs", Node: "elsewhere"}, time.Minute))
	e.log.beforeMessage = func(event.Event) error {
		return waitClosed(model.answered, "the run started ahead did not call the model")
	}
	p := e.post("t1", "touch it")
	assert.True(t, p.Queued)

	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	e.m.Shutdown(ctx) // waits for the run started ahead
	assert.Empty(t, e.events("t1", nil), "nothing of the undone run is committed")
	assert.Zero(t, box.ran.Load(), "the undone run started a tool")
	assert.NoFileExists(t, filepath.Join(e.workdir, "made.txt"), "the undone run ran its command")
	n, err := e.store.QueueLen(t.Context(), "t1")
	require.NoError(t, err)
	assert.Equal(t, 1, n, "the post waits for the thread's owner")
	assert.Equal(t, []string{"touch it"}, model.sent())
}

// TestConcurrentPostsCallTheModelOncePerPost posts to one thread from
// several goroutines at once, over and over: a run goes ahead of its
// commit only on a thread nothing else here is claiming or letting go,
// so no run is undone for a lost claim, and the model is called once a
// post.
func TestConcurrentPostsCallTheModelOncePerPost(t *testing.T) {
	claimModes(t, func(t *testing.T, e *env) {
		model, _ := seeModel(t, e, tools.PolicySuggest)
		const rounds, posters = 5, 8
		var posted []runs.Posted
		var mu sync.Mutex
		for r := range rounds {
			var wg sync.WaitGroup
			for i := range posters {
				wg.Go(func() {
					p, err := e.m.Post(t.Context(), "t1", runs.Input{Text: fmt.Sprintf("post %d.%d", r, i)})
					assert.NoError(t, err)
					mu.Lock()
					posted = append(posted, p)
					mu.Unlock()
				})
			}
			wg.Wait()
		}
		for _, p := range posted {
			e.log.waitFor(t, 1, ended(p.Run))
		}
		assert.Equal(t, rounds*posters, len(model.sent()), "model calls, one a post")
		started := 0
		for _, ev := range e.events("t1", nil) {
			if ev == "run.started ?" {
				started++
			}
		}
		assert.Equal(t, rounds*posters, started, "runs started")
	})
}

// TestActiveWhileARunStartsAhead asks for the thread's active run while a
// run started ahead calls the model and its claim is not yet committed:
// the run is active already, so that a client joining the thread then
// does not take it for quiet.
func TestActiveWhileARunStartsAhead(t *testing.T) {
	claimModes(t, func(t *testing.T, e *env) {
		model, _ := seeModel(t, e, tools.PolicySuggest)
		active := make(chan string, 1)
		e.log.beforeMessage = func(event.Event) error {
			if err := waitClosed(model.called, "the model was not called before the message's commit"); err != nil {
				return err
			}
			run, err := e.m.Active(context.Background(), "t1")
			active <- run
			return err
		}
		p := e.post("t1", "hello")
		assert.Equal(t, p.Run, <-active, "the active run before its claim was committed")
		e.log.waitFor(t, 1, ended(p.Run))
		assert.Eventually(t, func() bool {
			run, err := e.m.Active(t.Context(), "t1")
			return err == nil && run == ""
		}, testTimeout, time.Millisecond, "the run stops being active once it ended")
	})
}
