package agent_test

import (
	"context"
	"iter"
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
)

// finishing is a model that says when its stream has ended.
type finishing struct {
	llm.Model
	streamed chan struct{}
}

func (m finishing) Stream(ctx context.Context, req llm.Request) iter.Seq2[llm.Chunk, error] {
	return func(yield func(llm.Chunk, error) bool) {
		defer close(m.streamed)
		for c, err := range m.Model.Stream(ctx, req) {
			if !yield(c, err) {
				return
			}
		}
	}
}

// heldJournal commits nothing until the model has streamed its whole
// reply, as a journal does whose commits are slow under load.
type heldJournal struct {
	*journal
	streamed chan struct{}
}

func (j heldJournal) Append(ctx context.Context, events ...event.Event) ([]event.Event, error) {
	<-j.streamed
	return j.journal.Append(ctx, events...)
}

// TestDeltasCoalesceWhileACommitIsSlow holds the run's first commit until
// the model has streamed its reply: with CoalesceDeltas the three chunks
// that gathered meanwhile reach the log as fewer deltas that still spell
// the message, in order; without it, as three.
func TestDeltasCoalesceWhileACommitIsSlow(t *testing.T) {
	for _, coalesce := range []bool{true, false} {
		e := newEnv(t, "text")
		e.thread += map[bool]string{true: "-on", false: "-off"}[coalesce]
		streamed := make(chan struct{})
		a := e.agent(agent.Config{Model: finishing{Model: e.model, streamed: streamed}, CoalesceDeltas: coalesce})
		spec := agent.Spec{Thread: e.thread, Run: event.NewID(), Input: "say hello"}
		_, err := e.store.Append(t.Context(), e.thread, event.New(e.thread, spec.Run, event.MessageUser{MessageID: event.NewID(), Text: "say hello"}))
		require.NoError(t, err)
		j := heldJournal{journal: newJournal(e.store, e.thread), streamed: streamed}
		require.NoError(t, a.Run(t.Context(), spec, j, agent.NewInbox()))

		evs := e.runEvents(spec.Run)
		deltas := payloads[event.MessageDelta](evs)
		var text strings.Builder
		for _, d := range deltas {
			text.WriteString(d.Text)
		}
		assert.Equal(t, "Hello there.", text.String(), "coalesce=%v", coalesce)
		assert.Equal(t, "Hello there.", only[event.MessageCompleted](t, evs).Text)
		if coalesce {
			assert.Less(t, len(deltas), 3, "at most the first commit's and the rest")
		} else {
			assert.Len(t, deltas, 3, "one per chunk")
		}
		checkIDs(t, evs)
	}
}

// previewJournal is a journal that takes previews; unwatched says that no
// subscriber waits for commits.
type previewJournal struct {
	*journal
	mu        sync.Mutex
	previews  []event.Event
	unwatched atomic.Bool
}

func (j *previewJournal) Preview(e event.Event) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.previews = append(j.previews, e)
}

func (j *previewJournal) Previews() bool { return true }

func (j *previewJournal) WaitsForCommits() bool { return !j.unwatched.Load() }

// began reports whether the message has begun for the thread's consumers:
// its message.started is committed or went out ahead as a mark.
func (j *previewJournal) began() bool {
	j.mu.Lock()
	for _, e := range j.previews {
		if e.Type() == event.TypeMessageStarted {
			j.mu.Unlock()
			return true
		}
	}
	j.mu.Unlock()
	j.journal.mu.Lock()
	defer j.journal.mu.Unlock()
	for _, e := range j.journal.committed {
		if e.Type() == event.TypeMessageStarted {
			return true
		}
	}
	return false
}

// gated is a model that streams its second and later chunks only once the
// message has begun for consumers (committed, or previewed as a mark): from
// then on nothing but deltas waits for a commit, so each of them goes out
// as a preview.
type gated struct {
	llm.Model
	t *testing.T
	j *previewJournal
}

func (m gated) Stream(ctx context.Context, req llm.Request) iter.Seq2[llm.Chunk, error] {
	return func(yield func(llm.Chunk, error) bool) {
		n := 0
		for c, err := range m.Model.Stream(ctx, req) {
			if n++; n == 2 {
				require.Eventually(m.t, m.j.began, testTimeout, time.Millisecond, "the message never began")
			}
			if !yield(c, err) {
				return
			}
		}
	}
}

// TestLiveDeltasGoOutAheadOfTheirCommit runs a reply with previews on and
// a window longer than the reply: every delta emitted once the message
// has begun goes out as a preview at once, after the run's last committed
// event, with offsets that tile the text; the log gets the text in fewer,
// larger deltas with the same offsets; without previews there are none.
func TestLiveDeltasGoOutAheadOfTheirCommit(t *testing.T) {
	for _, live := range []bool{true, false} {
		e := newEnv(t, "text")
		e.thread += map[bool]string{true: "-live", false: "-off"}[live]
		j := &previewJournal{journal: newJournal(e.store, e.thread)}
		cfg := agent.Config{Model: gated{Model: e.model, t: t, j: j}}
		if live {
			cfg.LiveDeltas = time.Minute
		}
		a := e.agent(cfg)
		spec := agent.Spec{Thread: e.thread, Run: event.NewID(), Input: "say hello"}
		_, err := e.store.Append(t.Context(), e.thread, event.New(e.thread, spec.Run, event.MessageUser{MessageID: event.NewID(), Text: "say hello"}))
		require.NoError(t, err)
		require.NoError(t, a.Run(t.Context(), spec, j, agent.NewInbox()))

		evs := e.runEvents(spec.Run)
		started := only[event.MessageStarted](t, evs)
		var startedSeq int64
		for _, ev := range evs {
			if ev.Type() == event.TypeMessageStarted {
				startedSeq = ev.Seq
			}
		}
		if !live {
			assert.Empty(t, j.previews)
			assert.Len(t, payloads[event.MessageDelta](evs), 3, "one per chunk")
			continue
		}
		// Whether message.started was committed before the deltas began
		// or went out ahead itself (a mark, when the run's first commit
		// was done by then) is up to timing; either way each delta's
		// preview comes after the message began.
		var deltaPreviews []event.Event
		markAhead := false
		for _, pv := range j.previews {
			switch pv.Type() {
			case event.TypeMessageStarted:
				markAhead = true
			case event.TypeMessageDelta:
				assert.True(t, markAhead || pv.Preview >= startedSeq,
					"preview after seq %d, before message.started (seq %d) began", pv.Preview, startedSeq)
				deltaPreviews = append(deltaPreviews, pv)
			}
		}
		j.previews = deltaPreviews
		t.Logf("message.started went out ahead: %v", markAhead)
		if markAhead {
			require.Len(t, j.previews, 3, "every chunk went out ahead, after the mark")
		} else {
			require.Len(t, j.previews, 2, "the chunks after the first went out ahead")
		}
		for _, pv := range j.previews {
			d, ok := pv.Payload.(event.MessageDelta)
			require.True(t, ok)
			assert.Equal(t, started.MessageID, d.MessageID)
			assert.Zero(t, pv.Seq, "a preview has no seq")
		}
		// The previews and the log's deltas tile the text, by offset.
		var previewed strings.Builder
		first := j.previews[0].Payload.(event.MessageDelta).Offset
		for _, pv := range j.previews {
			d := pv.Payload.(event.MessageDelta)
			assert.Equal(t, first+int64(previewed.Len()), d.Offset)
			previewed.WriteString(d.Text)
		}
		assert.Equal(t, "Hello there."[first:], previewed.String())
		deltas := payloads[event.MessageDelta](evs)
		assert.Less(t, len(deltas), 3, "committed in fewer deltas than chunks")
		var logged strings.Builder
		for _, d := range deltas {
			assert.Equal(t, int64(logged.Len()), d.Offset)
			logged.WriteString(d.Text)
		}
		assert.Equal(t, "Hello there.", logged.String())
		checkIDs(t, evs)
	}
}

// TestMarksLetTheFirstDeltasGoAhead holds every commit until the model has
// streamed its whole reply: a run that knows the seq it follows
// (Spec.After) previews the events that start it (run.started,
// node.entered, message.started: marks, which show as nothing) and then
// every delta, all before any commit, in the order it emits them, each
// after that seq; the log gets the same events.
func TestMarksLetTheFirstDeltasGoAhead(t *testing.T) {
	e := newEnv(t, "text")
	streamed := make(chan struct{})
	a := e.agent(agent.Config{Model: finishing{Model: e.model, streamed: streamed}, LiveDeltas: time.Minute})
	spec := agent.Spec{Thread: e.thread, Run: event.NewID(), Input: "say hello"}
	user, err := e.store.Append(t.Context(), e.thread, event.New(e.thread, spec.Run, event.MessageUser{MessageID: event.NewID(), Text: "say hello"}))
	require.NoError(t, err)
	spec.After = user[0].Seq
	j := &previewJournal{journal: newJournal(e.store, e.thread)}
	held := heldPreviewJournal{heldJournal{journal: j.journal, streamed: streamed}, j}
	require.NoError(t, a.Run(t.Context(), spec, held, agent.NewInbox()))

	var types []event.Type
	var text strings.Builder
	for _, pv := range j.previews {
		assert.Equal(t, spec.After, pv.Preview, "every preview follows the user's message")
		if len(types) == 0 || types[len(types)-1] != pv.Type() {
			types = append(types, pv.Type())
		}
		if d, ok := pv.Payload.(event.MessageDelta); ok {
			assert.Equal(t, int64(text.Len()), d.Offset)
			text.WriteString(d.Text)
		}
	}
	assert.Equal(t, []event.Type{event.TypeRunStarted, event.TypeNodeEntered, event.TypeMessageStarted, event.TypeMessageDelta}, types,
		"the marks, then the deltas, ahead of every commit")
	assert.Equal(t, "Hello there.", text.String())
	evs := e.runEvents(spec.Run)
	previewed := map[string]bool{}
	for _, pv := range j.previews {
		previewed[pv.ID] = true
	}
	for _, ev := range evs {
		if ev.Type() == event.TypeRunStarted || ev.Type() == event.TypeMessageStarted {
			assert.True(t, previewed[ev.ID], "the commit of %s has its preview's id", ev.Type())
		}
	}
}

// heldPreviewJournal is a heldJournal that takes previews.
type heldPreviewJournal struct {
	heldJournal
	p *previewJournal
}

func (j heldPreviewJournal) Preview(e event.Event) { j.p.Preview(e) }
func (j heldPreviewJournal) Previews() bool        { return true }
func (j heldPreviewJournal) WaitsForCommits() bool { return j.p.WaitsForCommits() }

// watching is a model that streams its first chunk while no subscriber
// waits for commits, then lets one join and streams each later chunk only
// once the deltas before it are committed: which they are, promptly, only
// if the join shortened the window.
type watching struct {
	llm.Model
	t *testing.T
	j *previewJournal
}

func (m watching) Stream(ctx context.Context, req llm.Request) iter.Seq2[llm.Chunk, error] {
	return func(yield func(llm.Chunk, error) bool) {
		n, sent := 0, 0
		for c, err := range m.Model.Stream(ctx, req) {
			if n++; n == 2 {
				m.j.unwatched.Store(false)
			}
			if n > 2 {
				require.Eventually(m.t, func() bool { return m.j.committedText() >= sent }, testTimeout, time.Millisecond,
					"the text streamed before chunk %d was never committed", n)
			}
			sent += len(c.Text)
			if !yield(c, err) {
				return
			}
		}
	}
}

// committedText is the length of the message text committed so far.
func (j *previewJournal) committedText() int {
	j.journal.mu.Lock()
	defer j.journal.mu.Unlock()
	n := 0
	for _, e := range j.journal.committed {
		if d, ok := e.Payload.(event.MessageDelta); ok {
			n += len(d.Text)
		}
	}
	return n
}

// TestUnwatchedDeltasWaitLonger: while no live subscriber waits for
// commits, a message's deltas gather for LiveDeltasUnwatched (here longer
// than the reply: the reply is committed in one delta, at its end); once
// one joins, for LiveDeltas (here next to nothing).
func TestUnwatchedDeltasWaitLonger(t *testing.T) {
	for _, joins := range []bool{false, true} {
		e := newEnv(t, "text")
		e.thread += map[bool]string{true: "-joins", false: "-alone"}[joins]
		j := &previewJournal{journal: newJournal(e.store, e.thread)}
		j.unwatched.Store(true)
		var model llm.Model = e.model
		if joins {
			model = watching{Model: e.model, t: t, j: j}
		}
		a := e.agent(agent.Config{Model: model, LiveDeltas: time.Nanosecond, LiveDeltasUnwatched: time.Hour})
		spec := agent.Spec{Thread: e.thread, Run: event.NewID(), Input: "say hello"}
		_, err := e.store.Append(t.Context(), e.thread, event.New(e.thread, spec.Run, event.MessageUser{MessageID: event.NewID(), Text: "say hello"}))
		require.NoError(t, err)
		require.NoError(t, a.Run(t.Context(), spec, j, agent.NewInbox()))

		deltas := payloads[event.MessageDelta](e.runEvents(spec.Run))
		var text strings.Builder
		for _, d := range deltas {
			text.WriteString(d.Text)
		}
		assert.Equal(t, "Hello there.", text.String())
		if joins {
			assert.Greater(t, len(deltas), 1, "committed as they came once a subscriber waited")
		} else {
			assert.Len(t, deltas, 1, "committed once, at the message's end")
		}
	}
}
