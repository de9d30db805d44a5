package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/generated/threadsapi"
	"github.com/agentwire/agentwire/internal/protocol"
	"github.com/agentwire/agentwire/internal/protocol/threads"
)

// scenarioPath is the cluster scenario, as an absolute path for server
// processes that run in folders of their own.
func scenarioPath(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs("testdata/cluster.yaml")
	require.NoError(t, err)
	return p
}

// stream is what a threads client has read of one stream.
type stream struct {
	ids    []protocol.Position // the SSE ids, in order
	text   string              // the agent_text chunks, concatenated
	end    threadsapi.StreamEvent
	ended  bool
	lastID string
}

// checkOrder checks that the stream's ids increase: by seq, then by the
// bytes of text sent ahead of the log.
func (st *stream) checkOrder(t *testing.T, what string) {
	t.Helper()
	for j := 1; j < len(st.ids); j++ {
		a, b := st.ids[j-1], st.ids[j]
		require.True(t, a.Seq < b.Seq || (a.Seq == b.Seq && a.Shown < b.Shown),
			"%s: ids %v: a duplicate or out of order", what, st.ids)
	}
}

// read reads s until it ends or n agent_text chunks have come (n < 0: to
// the end), adding to st.
func (st *stream) read(t *testing.T, s *threads.Stream, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for n != 0 {
		e, err := s.Next(ctx)
		if errors.Is(err, io.EOF) {
			return
		}
		require.NoError(t, err, "after %d events", len(st.ids))
		id, err := protocol.ParsePosition(threads.EventID(e))
		require.NoError(t, err)
		st.ids = append(st.ids, id)
		st.lastID = threads.EventID(e)
		switch e.Type {
		case threadsapi.AgentTextSSEStreamEvent:
			st.text += e.AgentTextSSE.Data.Chunk
			n--
		case threadsapi.DoneSSEStreamEvent, threadsapi.ErrorSSEStreamEvent:
			st.end, st.ended = e, true
			return
		}
	}
}

// TestCrashRecoveryKeepsThePartialAnswer kills the server with SIGKILL in
// the middle of a streaming answer, 20 times at different points, and
// restarts it each time, in turn sending each delta once committed, merging
// the deltas that gather behind a commit (--coalesce-deltas), and sending
// deltas ahead of their commit (--live-deltas): the client that resumes
// the stream gets the rest of what was stored, with no gap and no
// duplicate, and then an error (the run was interrupted), never done; the
// history keeps the partial answer, marked incomplete. With deltas sent
// ahead, the client may have been shown words the crash kept from the
// log: the history then holds the start of what the client has, or, when
// the crash came before the message's start was committed, no message.
func TestCrashRecoveryKeepsThePartialAnswer(t *testing.T) {
	dir := t.TempDir()
	args := []string{"--data-dir", filepath.Join(dir, "data"), "--workdir", filepath.Join(dir, "work"),
		"--scenario", scenarioPath(t), "--shutdown-grace", "1s"}
	modes := [][]string{
		{"--coalesce-deltas", "off", "--live-deltas", "off"},
		{"--coalesce-deltas", "on", "--live-deltas", "off"},
		{"--live-deltas", "150ms"},
	}
	ahead := func(i int) bool { return i%len(modes) == 2 }
	coalesce := func(i int) []string {
		return append(slices.Clone(args), modes[i%len(modes)]...)
	}
	server := startProc(t, dir, coalesce(0)...)
	aheadKills := 0 // rounds killed while the client was ahead of the log
	for i := range 20 {
		client, err := threads.NewClient("http://"+server.addr, nil)
		require.NoError(t, err)
		id := uuid.New()
		s, err := client.SendMessage(t.Context(), id, "slow please")
		require.NoError(t, err)
		var st stream
		st.read(t, s, 1+i%7)
		require.False(t, st.ended, "round %d: the run ended before the crash", i)
		server.kill()
		_ = s.Close()
		if strings.Contains(st.lastID, ":") {
			aheadKills++
		}

		server = startProc(t, dir, coalesce(i+1)...)
		client, err = threads.NewClient("http://"+server.addr, nil)
		require.NoError(t, err)
		r, err := client.Resume(t.Context(), id, st.lastID)
		require.NoError(t, err)
		st.read(t, r, -1)
		_ = r.Close()
		require.True(t, st.ended, "round %d: the resumed stream did not end", i)
		require.Equal(t, threadsapi.ErrorSSEStreamEvent, st.end.Type, "round %d: the resumed stream ends with %s", i, st.end.Type)
		assert.Equal(t, "The server stopped while this run was going on.", st.end.ErrorSSE.Data.Error)
		st.checkOrder(t, fmt.Sprintf("round %d", i))

		h, err := client.History(t.Context(), id)
		require.NoError(t, err)
		var agent []threadsapi.AgentContent
		for _, m := range h.Messages {
			if m.MessageType == threadsapi.MessageMessageTypeAgent {
				agent = append(agent, m.Content.AgentContent)
			}
		}
		if ahead(i) && len(agent) == 0 {
			// The crash came before the message's start was committed:
			// all the client had was ahead of the log.
			assert.NotEmpty(t, st.text, "round %d", i)
		} else if ahead(i) {
			require.Len(t, agent, 1, "round %d: the partial answer is in the history", i)
			assert.Equal(t, threadsapi.NewOptBool(true), agent[0].Incomplete, "round %d", i)
			assert.True(t, strings.HasPrefix(st.text, agent[0].Text),
				"round %d: the stored answer %q begins what the client received, %q", i, agent[0].Text, st.text)
		} else {
			require.Len(t, agent, 1, "round %d: the partial answer is in the history", i)
			assert.Equal(t, threadsapi.NewOptBool(true), agent[0].Incomplete, "round %d", i)
			assert.Equal(t, st.text, agent[0].Text, "round %d: what the client received, before and after the crash, is the stored answer", i)
		}
		assert.True(t, strings.HasPrefix(slowReply, st.text),
			"round %d: %q", i, st.text)
	}
	assert.Positive(t, aheadKills, "some crashes came while the client had text the log had not")
}

// slowReply is the slow rule's reply in testdata/cluster.yaml.
const slowReply = "This reply streams one word at a time, slowly enough that a test can kill the server that runs it while it is still going, and then see what the other servers make of it. It goes on for a while on purpose: a test that reads a few of its words before it kills the server must find the run still going, even on a machine so busy that the test reads late. So here are some more words, one at a time, to give it that time: one, two, three, four, five, six, seven, eight, nine, ten, eleven, twelve, thirteen, fourteen, fifteen, sixteen, seventeen, eighteen, nineteen, twenty."
