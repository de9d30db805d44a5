package threads_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/protocol/threads"
	"github.com/agentwire/agentwire/internal/server"
	"github.com/agentwire/agentwire/internal/store"
)

// heldStore is the server's store with a gate on the commit that claims a
// thread for a run and records its user's message: while the gate is
// shut, a post's run has started (ahead of that commit) but nothing of it
// is in the log.
type heldStore struct {
	store.Store

	mu      sync.Mutex
	shut    bool
	arrived chan struct{} // closed when a claim reached the shut gate
	open    chan struct{} // closed to let it through
}

func (s *heldStore) ClaimAndAppend(ctx context.Context, c store.RunClaim, lease time.Duration, events ...event.Event) ([]event.Event, error) {
	s.mu.Lock()
	shut, arrived, open := s.shut, s.arrived, s.open
	s.shut = false
	s.mu.Unlock()
	if shut {
		close(arrived)
		<-open
	}
	return s.Store.ClaimAndAppend(ctx, c, lease, events...)
}

// shutGate holds the next claim back until the returned open is called.
func (s *heldStore) shutGate() (arrived <-chan struct{}, open func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shut, s.arrived, s.open = true, make(chan struct{}), make(chan struct{})
	return s.arrived, sync.OnceFunc(func() { close(s.open) })
}

// TestResumeWhileARunStartsAhead resumes a thread's stream after its
// last turn's done while the next turn's run has started but its claim
// and message are not committed: the stream must neither send the done
// the client had again nor end as if the thread were quiet, but show the
// new turn, to its done.
func TestResumeWhileARunStartsAhead(t *testing.T) {
	held := &heldStore{}
	h := start(t, testConfig(t), server.Options{
		Heartbeat: 5 * time.Millisecond,
		Store:     func(s store.Store) store.Store { held.Store = s; return held },
	})
	thread := uuid.New()
	first := h.send(thread, "echo one")
	require.Equal(t, "agent_text done", shape(first))
	last := threads.EventID(first[len(first)-1])
	// The first turn's done is committed before its run lets the thread
	// go; a post before that would queue behind it and start without a
	// claim of its own, never reaching the gate.
	h.waitQuiet(thread, last)

	arrived, open := held.shutGate()
	defer open()
	posted := make(chan string, 1)
	go func() {
		defer close(posted) // also when send fails the test and exits
		got := h.send(thread, "echo two")
		posted <- shape(got)
	}()
	select {
	case <-arrived:
	case got, ok := <-posted:
		if !ok {
			t.Fatal("the post failed before it claimed the thread")
		}
		t.Fatalf("the post ran (%s) without claiming the thread", got)
	}

	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, h.base+"/api/v1/threads/"+thread.String()+"/events", nil)
	require.NoError(t, err)
	req.Header.Set("Last-Event-ID", last)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	// The stream checks whether the thread is quiet before its first
	// heartbeat: a ping means it found the thread busy and went on.
	sc := bufio.NewScanner(resp.Body)
	var ids, names []string
	for sc.Scan() {
		line := sc.Text()
		if line == ": ping" && len(names) == 0 {
			open()
		}
		if id, ok := strings.CutPrefix(line, "id: "); ok {
			ids = append(ids, id)
		}
		if name, ok := strings.CutPrefix(line, "event: "); ok {
			names = append(names, name)
		}
	}
	open() // a stream that ended at once ended before it
	require.NoError(t, sc.Err())
	require.NotEmpty(t, names, "the stream ended with nothing")
	assert.Equal(t, "done", names[len(names)-1], "the stream ends with the new turn's done")
	assert.Contains(t, names, "agent_text", "the new turn's text")
	assert.NotContains(t, ids, last, "an event the client had came again")
	assert.Equal(t, "agent_text done", <-posted)
}

// waitQuiet waits until the thread has no active run and shows nothing
// after last: a stream resumed from last ends then, with done (it checks
// again every heartbeat while a run is active).
func (h *harness) waitQuiet(thread uuid.UUID, last string) {
	h.t.Helper()
	s, err := h.client.Resume(h.t.Context(), thread, last)
	require.NoError(h.t, err)
	defer s.Close()
	got := readAll(h.t, s)
	require.Equal(h.t, "done", shape(got), "the thread after its last event")
}
