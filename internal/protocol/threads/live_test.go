package threads_test

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/generated/threadsapi"
	"github.com/agentwire/agentwire/internal/protocol"
	"github.com/agentwire/agentwire/internal/protocol/threads"
	"github.com/agentwire/agentwire/internal/server"
)

// thousandWords is the reply of the "many words" scenario.
func thousandWords() string {
	var words strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&words, "w%d ", i)
	}
	return words.String()
}

// checkPositions checks that a stream's ids are positions that increase:
// by seq, and within one seq by the bytes sent ahead of the log. It
// returns how many were ahead.
func checkPositions(t *testing.T, events []threadsapi.StreamEvent) (ahead int) {
	t.Helper()
	var prev protocol.Position
	for i, e := range events {
		p, err := protocol.ParsePosition(threads.EventID(e))
		require.NoError(t, err, "event %d (%s)", i, string(e.Type))
		require.True(t, p.Seq > prev.Seq || (p.Seq == prev.Seq && p.Shown > prev.Shown),
			"event %d (%s): id %s does not follow %s", i, string(e.Type), p, prev)
		if p.Stream != "" {
			ahead++
		}
		prev = p
	}
	return ahead
}

// text joins the agent_text chunks of events.
func text(events []threadsapi.StreamEvent) string {
	var b strings.Builder
	for _, e := range events {
		if string(e.Type) == threads.EventAgentText {
			b.WriteString(e.AgentTextSSE.Data.Chunk)
		}
	}
	return b.String()
}

// TestLiveDeltasReachStreamsBeforeTheirCommit runs a long reply with
// previews on: the POST stream gets the text ahead of its commit (ids
// that say how far ahead), each byte once, and a client that drops its
// stream every few events and resumes with the last id it got, ahead of
// the log or not, ends with the same text, once.
func TestLiveDeltasReachStreamsBeforeTheirCommit(t *testing.T) {
	h := start(t, testConfig(t, "--live-deltas", "30ms"), server.Options{})
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	thread := uuid.New()

	s, err := h.client.SendMessage(t.Context(), thread, "many words please")
	require.NoError(t, err)
	var got []threadsapi.StreamEvent
	aheadResumes := 0
	read := func(s *threads.Stream, n int) bool {
		for range n {
			e, err := s.Next(t.Context())
			if errors.Is(err, io.EOF) {
				return true
			}
			require.NoError(t, err)
			got = append(got, e)
			if e.Type == threadsapi.DoneSSEStreamEvent || e.Type == threadsapi.ErrorSSEStreamEvent {
				return true // the stream's last event: a client does not resume after it
			}
		}
		return false
	}
	ended := read(s, 1+rng.IntN(4))
	s.Close()
	resumes := 0
	for ; !ended; resumes++ {
		n := 1 + rng.IntN(4)
		if resumes == 200 {
			n = math.MaxInt
		}
		last := threads.EventID(got[len(got)-1])
		if strings.Contains(last, ":") {
			aheadResumes++
		}
		r, err := h.client.Resume(t.Context(), thread, last)
		require.NoError(t, err)
		ended = read(r, n)
		r.Close()
	}
	assert.Equal(t, thousandWords(), text(got), "every word once, in order")
	checkPositions(t, got)
	assert.Greater(t, aheadResumes, 0, "some resumes began ahead of the log")
	assert.Equal(t, threadsapi.DoneSSEStreamEvent, got[len(got)-1].Type)

	// A whole stream of the thread, read after the run, has only committed
	// text; a live one, of a second run, has text ahead of the log.
	after, err := h.client.Resume(t.Context(), thread, "")
	require.NoError(t, err)
	replayed := readAll(t, after)
	assert.Zero(t, checkPositions(t, replayed), "the log has no previews")
	assert.Equal(t, thousandWords(), text(replayed))

	live, err := h.client.SendMessage(t.Context(), thread, "many words please")
	require.NoError(t, err)
	streamed := readAll(t, live)
	assert.Positive(t, checkPositions(t, streamed), "text went out ahead of its commit")
	assert.Equal(t, thousandWords(), text(streamed))
	// The log holds the reply in fewer deltas than the stream sent chunks:
	// they were committed in batches.
	runs, err := h.client.Resume(t.Context(), thread, threads.EventID(replayed[len(replayed)-1]))
	require.NoError(t, err)
	committed := readAll(t, runs)
	assert.Equal(t, thousandWords(), text(committed))
	chunks := func(events []threadsapi.StreamEvent) (n int) {
		for _, e := range events {
			if string(e.Type) == threads.EventAgentText {
				n++
			}
		}
		return n
	}
	t.Logf("the reply streamed as %d chunks and is logged as %d deltas", chunks(streamed), chunks(committed))
	assert.Less(t, 2*chunks(committed), chunks(streamed), "deltas were committed in batches")
}
