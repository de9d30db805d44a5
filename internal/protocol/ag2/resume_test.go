package ag2_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/generated/ag2api"
)

// TestResumeReplaysThenBoundaryThenLive: the document's reading
// (--ag2-resume=after-seq); transcript_test.go has the default's.
func TestResumeReplaysThenBoundaryThenLive(t *testing.T) {
	h := start(t, testConfig(t, "--ag2-resume=after-seq"))
	c := h.dial("")
	c.say("echo first")
	live := c.turn()
	lastSeq := live[len(live)-1].seq

	c2 := h.dial(c.chat)
	c2.resume(0)
	replayed := c2.until(ag2api.TypeChatResumeBoundary)
	boundary := replayed[len(replayed)-1].msg.(ag2api.ResumeBoundary).Data
	replayed = replayed[:len(replayed)-1]
	checkSeqs(t, replayed)
	for _, f := range replayed {
		assert.True(t, f.replay, "a replayed frame is marked: %s", f.raw)
	}
	texts := ofType(replayed, ag2api.TypeChatText)
	require.Len(t, texts, 2, "the replay has the user's turn and the reply: %v", types(replayed))
	assert.Equal(t, "user", texts[0].msg.(ag2api.Text).Data.Agent)
	assert.Equal(t, "echo first", texts[0].msg.(ag2api.Text).Data.Content)
	prints := ofType(replayed, ag2api.TypeChatPrint)
	require.Len(t, prints, 1, "a message's deltas are coalesced into one chat.print")
	assert.Equal(t, "You said: echo first", prints[0].msg.(ag2api.Print).Data.Content)
	assert.Equal(t, c.chat, boundary.ChatID)
	require.NotNil(t, boundary.ReplayedMessages)
	assert.Equal(t, len(ofSeq(replayed)), *boundary.ReplayedMessages)
	assert.Equal(t, lastSeq, *boundary.LastMessageIndex)
	assert.Equal(t, *boundary.ReplayedMessages, *boundary.TotalMessages)

	// Live after the boundary, on both sockets, with no gap.
	c2.say("echo second")
	live2 := c2.turn()
	assert.Greater(t, live2[0].seq, lastSeq)
	for _, f := range live2 {
		assert.False(t, f.replay)
	}
	other := c.turn()
	otherTexts := ofType(other, ag2api.TypeChatText)
	require.Len(t, otherTexts, 2, "the other tab sees the user's message and the reply")
	assert.Equal(t, "user", otherTexts[0].msg.(ag2api.Text).Data.Agent)
	assert.Equal(t, "echo second", otherTexts[0].msg.(ag2api.Text).Data.Content)

	// From the middle: only what follows.
	c3 := h.dial(c.chat)
	c3.resume(lastSeq)
	tail := c3.until(ag2api.TypeChatResumeBoundary)
	b := tail[len(tail)-1].msg.(ag2api.ResumeBoundary).Data
	tail = tail[:len(tail)-1]
	require.NotEmpty(t, tail)
	for _, f := range tail {
		if f.seq > 0 {
			assert.Greater(t, f.seq, lastSeq)
		}
	}
	assert.Greater(t, *b.TotalMessages, *b.ReplayedMessages)

	// Past the end: a boundary with nothing replayed.
	c3.resume(1 << 30)
	f := c3.next()
	require.Equal(t, ag2api.TypeChatResumeBoundary, f.typ)
	end := f.msg.(ag2api.ResumeBoundary).Data
	assert.Equal(t, 0, *end.ReplayedMessages)
	assert.Equal(t, 0, *end.LastMessageIndex)
}

func TestResumeOfANewChatIsAnEmptyBoundary(t *testing.T) {
	h := start(t, testConfig(t))
	c := h.dial("")
	c.resume(0)
	f := c.next()
	require.Equal(t, ag2api.TypeChatResumeBoundary, f.typ)
	b := f.msg.(ag2api.ResumeBoundary).Data
	assert.Equal(t, 0, *b.ReplayedMessages)
	assert.Equal(t, 0, *b.TotalMessages)
}

func TestCorruptResumeIsResumeFailed(t *testing.T) {
	h := start(t, testConfig(t))
	c := h.dial("")
	c.sendRaw(`{"type":"client.resume","chat_id":"another-chat","lastClientIndex":3}`)
	e := c.expectError()
	assert.Equal(t, "RESUME_FAILED", errCode(e))
	for _, frame := range []string{`{"type":"client.resume","lastClientIndex":-4}`, `{"type":"client.resume","lastClientIndex":"7"}`} {
		c.sendRaw(frame)
		e = c.expectError()
		assert.Equal(t, "RESUME_FAILED", errCode(e), frame)
		assert.Equal(t, "lastClientIndex", details(t, e)["field"], frame)
	}
	// The socket goes on.
	c.resume(0)
	c.until(ag2api.TypeChatResumeBoundary)
}

// A client that loses its socket mid-stream, reconnects to a restarted
// server and resumes from the last seq it holds receives, in all, what
// one uninterrupted socket receives.
func TestResumeAcrossARestartLosesNothingAndDoublesNothing(t *testing.T) {
	cfg := testConfig(t)
	h := startNoLeakCheck(t, cfg)
	watcher := h.dial("")
	chat := watcher.chat
	c := h.dial(chat)
	c.say("tell me a long story")
	var first []got
	for len(ofType(first, ag2api.TypeChatPrint)) < 5 {
		first = append(first, c.next())
	}
	c.close()
	// The run goes on without it.
	var uninterrupted []got
	for _, f := range watcher.turn() {
		// The user's message is not echoed to the socket that sent it.
		if f.seq >= first[0].seq {
			uninterrupted = append(uninterrupted, f)
		}
	}
	h.shutdown()

	h2 := startNoLeakCheck(t, cfg)
	c2 := h2.dial(chat)
	c2.resumeKeeping(first[len(first)-1].seq)
	rest := c2.until(ag2api.TypeChatResumeBoundary)
	rest = rest[:len(rest)-1]
	all := append(append([]got{}, first...), rest...)
	checkSeqs(t, all)

	// The same frames but for chunks merged in the replay: the same text,
	// the same non-chunk frames with the same seqs.
	assert.Equal(t, printed(ofSeqNotPrint(uninterrupted)), printed(ofSeqNotPrint(all)))
	assert.Equal(t, concatPrints(uninterrupted), concatPrints(all))
	assert.Equal(t, "Once upon a time there was a server that streamed every word of its story to a client that kept losing its connection and coming back for more.",
		concatPrints(all))

	// And it goes on live.
	c2.say("echo after the restart")
	texts := ofType(c2.turn(), ag2api.TypeChatText)
	assert.Equal(t, "You said: echo after the restart", texts[len(texts)-1].msg.(ag2api.Text).Data.Content)
}

func ofSeq(frames []got) []got {
	var out []got
	for _, f := range frames {
		if f.seq > 0 {
			out = append(out, f)
		}
	}
	return out
}

func ofSeqNotPrint(frames []got) []got {
	var out []got
	for _, f := range ofSeq(frames) {
		if f.typ != ag2api.TypeChatPrint {
			out = append(out, f)
		}
	}
	return out
}

// printed names frames by type and seq, for comparing sequences.
func printed(frames []got) []string {
	out := make([]string, len(frames))
	for i, f := range frames {
		out[i] = f.typ + "#" + strconv.Itoa(f.seq)
	}
	return out
}

func concatPrints(frames []got) string {
	var b strings.Builder
	for _, f := range ofType(frames, ag2api.TypeChatPrint) {
		b.WriteString(f.msg.(ag2api.Print).Data.Content)
	}
	return b.String()
}

// A socket that joins a chat while it streams and resumes at once gets
// the frames after its index (those it keeps of the transcript), then the
// live ones, each once and in seq order, with nothing missing.
func TestResumeWhileTheChatStreams(t *testing.T) {
	h := start(t, testConfig(t))
	a := h.dial("")
	a.say("one long story please")
	var first []got
	for len(ofType(first, ag2api.TypeChatPrint)) < 5 {
		first = append(first, a.next())
	}
	b := h.dial(a.chat)
	b.resumeKeeping(first[len(first)-1].seq)
	var rest []got
	for {
		f := b.next()
		if f.typ != ag2api.TypeChatResumeBoundary {
			rest = append(rest, f)
		}
		if f.typ == ag2api.TypeChatRunComplete {
			break
		}
	}
	checkSeqs(t, rest)
	assert.Equal(t, "Once upon a time there was a server that streamed every word of its story to a client that kept losing its connection and coming back for more.",
		concatPrints(append(append([]got{}, first...), rest...)))
}

// TestResumeAtRandomPositions: a client loses its socket at random points
// of a reply streamed word by word and resumes each time with the last seq
// it holds, until the run completes; then 200 more clients resume the
// finished chat at random chunks of the reply. Each ends up with what a
// socket that never dropped received: the reply's words exactly once, in
// order, the same frames of every other kind, and seqs that only increase.
// (A resume sends what a client missed of a message as one chat.print, so
// the live part sees fewer resumes than the reply has words.) The clients
// keep what they had, and drop the part of each transcript they hold.
func TestResumeAtRandomPositions(t *testing.T) {
	h := start(t, testConfig(t))
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	var words strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&words, "w%d ", i)
	}

	c := h.dial("")
	whole := h.dial(c.chat) // never drops, and misses nothing: it resumes from 0
	whole.resume(0)
	c.say("many words please")

	// read takes up to n frames from c (all of them with n < 0) after
	// seq after, and reports whether the run completed.
	read := func(c *client, n int, frames *[]got) bool {
		for i := 0; n < 0 || i < n; i++ {
			g := c.next()
			if g.typ == ag2api.TypeChatResumeBoundary {
				continue
			}
			*frames = append(*frames, g)
			if g.typ == ag2api.TypeChatRunComplete {
				return true
			}
		}
		return false
	}
	lastSeq := func(frames []got) int {
		last := 0
		for _, f := range frames {
			last = max(last, f.seq)
		}
		return last
	}
	var frames []got
	ended := read(c, 1+rng.IntN(4), &frames)
	c.close()
	resumes := 0
	for ; !ended; resumes++ {
		r := h.dial(c.chat)
		r.resumeKeeping(lastSeq(frames))
		ended = read(r, 1+rng.IntN(4), &frames)
		r.close()
	}
	t.Logf("%d resumes while the reply streamed", resumes)
	checkSeqs(t, frames)
	want := whole.turn()
	// The user's turn is left out: the socket that sent it is not sent it.
	notUserTurn := func(frames []got) []got {
		return slices.DeleteFunc(slices.Clone(frames), func(f got) bool {
			m, ok := f.msg.(ag2api.Text)
			return ok && m.Data.Agent == "user"
		})
	}
	assert.Equal(t, printed(notUserTurn(ofSeqNotPrint(want))), printed(notUserTurn(ofSeqNotPrint(frames))),
		"the same frames besides chat.print")
	assert.Equal(t, words.String(), concatPrints(frames), "every word once, in order")
	require.Equal(t, words.String(), concatPrints(want))

	prints := ofType(want, ag2api.TypeChatPrint)
	for range 200 {
		at := rng.IntN(len(prints))
		r := h.dial(c.chat)
		r.resumeKeeping(prints[at].seq)
		var rest []got
		require.True(t, read(r, -1, &rest))
		r.close()
		for _, f := range ofSeq(rest) {
			require.Greater(t, f.seq, prints[at].seq, "nothing at or before the resume point: %s", f.raw)
		}
		require.Equal(t, words.String(), concatPrints(prints[:at+1])+concatPrints(rest), "resumed after chunk %d of %d", at+1, len(prints))
	}
}
