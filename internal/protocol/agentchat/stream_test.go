package agentchat

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/protocol"
)

func TestStreamParam(t *testing.T) {
	for _, tc := range []struct {
		query, def string
		chunks     bool
		err        string
	}{
		{"", "message", false, ""},
		{"", "chunks", true, ""},
		{"", "", false, ""},
		{"stream=chunks", "message", true, ""},
		{"stream=message", "chunks", false, ""},
		{"stream=chunks&thread=x", "", true, ""},
		{"stream=", "chunks", false, "stream is empty: want message or chunks, or leave it out for the server's default (chunks)"},
		{"stream=tokens", "message", false, `stream "tokens": want message or chunks`},
		{"stream=Chunks", "message", false, `stream "Chunks": want message or chunks`},
		{"stream=chunks&stream=chunks", "message", false, "stream is given more than once"},
	} {
		q, err := url.ParseQuery(tc.query)
		require.NoError(t, err)
		chunks, err := streamParam(q, tc.def)
		if tc.err != "" {
			require.Error(t, err, tc.query)
			assert.Contains(t, err.Error(), tc.err)
			continue
		}
		require.NoError(t, err, tc.query)
		assert.Equal(t, tc.chunks, chunks, tc.query)
	}
}

// What each socket is sent of a message concatenates to the message's
// text however it met the message.
func TestTextsSendEachSocketTheMessageOnce(t *testing.T) {
	tx := newTexts()
	early, late, absent := &client{chunks: true}, &client{chunks: true}, &client{chunks: true}
	got := map[*client]string{}
	send := func(m *openText, cls ...*client) {
		for _, cl := range cls {
			got[cl] += m.unsent(cl)
		}
	}
	tx.start("r1", "m1")
	m := tx.delta("r1", 2, event.MessageDelta{MessageID: "m1", Text: "Hello, "})
	send(m, early)
	m = tx.delta("r1", 3, event.MessageDelta{MessageID: "m1", Text: "brave "})
	send(m, early)
	// late meets the message here; early misses a chunk (it was away).
	m = tx.delta("r1", 4, event.MessageDelta{MessageID: "m1", Text: "new "})
	send(m, late)
	m = tx.delta("r1", 5, event.MessageDelta{MessageID: "m1", Text: "world"})
	send(m, early, late)
	assert.Equal(t, "Hello, brave new world", got[early])
	assert.Equal(t, "Hello, brave new world", got[late])

	m = tx.take("m1")
	require.NotNil(t, m)
	assert.Nil(t, tx.take("m1"), "a finished message is forgotten")
	for _, cl := range []*client{early, late, absent} {
		rest, ok := m.rest(cl, "Hello, brave new world!")
		require.True(t, ok)
		got[cl] += rest
	}
	for _, cl := range []*client{early, late, absent} {
		assert.Equal(t, "Hello, brave new world!", got[cl], "the finished text, once")
	}

	// A message nobody saw the chunks of is sent whole at its end.
	rest, ok := (*openText)(nil).rest(early, "all at once")
	assert.True(t, ok)
	assert.Equal(t, "all at once", rest)
}

// A message that is white space so far sends nothing until it is not;
// a blank message sends nothing at all, as in message mode.
func TestTextsHoldBackBlankText(t *testing.T) {
	tx := newTexts()
	cl := &client{chunks: true}
	tx.start("r", "m")
	m := tx.delta("r", 2, event.MessageDelta{MessageID: "m", Text: "\n"})
	assert.Empty(t, m.unsent(cl))
	m = tx.delta("r", 3, event.MessageDelta{MessageID: "m", Text: "  "})
	assert.Empty(t, m.unsent(cl))
	m = tx.delta("r", 4, event.MessageDelta{MessageID: "m", Text: "Hi"})
	assert.Equal(t, "\n  Hi", m.unsent(cl))
	rest, ok := tx.take("m").rest(cl, "\n  Hi")
	assert.True(t, ok)
	assert.Empty(t, rest)

	tx.start("r", "blank")
	m = tx.delta("r", 6, event.MessageDelta{MessageID: "blank", Text: " \n"})
	assert.Empty(t, m.unsent(cl))
	rest, ok = tx.take("blank").rest(cl, " \n")
	assert.True(t, ok)
	assert.Empty(t, rest)
}

// A finished text that does not continue what a socket was sent cannot
// be completed without repeating: nothing more is sent.
func TestTextsRestRefusesADifferentText(t *testing.T) {
	tx := newTexts()
	cl, other := &client{chunks: true}, &client{chunks: true}
	tx.start("r", "m")
	m := tx.delta("r", 2, event.MessageDelta{MessageID: "m", Text: "abc"})
	assert.Equal(t, "abc", m.unsent(cl))
	_, ok := m.rest(cl, "xyz")
	assert.False(t, ok)
	rest, ok := m.rest(other, "xyz")
	assert.True(t, ok, "a socket sent nothing yet gets the text")
	assert.Equal(t, "xyz", rest)
	_, ok = m.rest(cl, "ab")
	assert.False(t, ok, "shorter than what was sent")
}

func TestTextsEndRunForgetsItsMessages(t *testing.T) {
	tx := newTexts()
	tx.start("r1", "a")
	tx.start("r2", "b")
	tx.delta("r1", 3, event.MessageDelta{MessageID: "c", Text: "x"})
	tx.endRun("r1")
	assert.Equal(t, []string{"b"}, keys(tx.open))
}

func keys(m map[string]*openText) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// logCore is a Core that reads a fixed log; nothing else is called.
type logCore struct {
	protocol.Core
	log   []event.Event // log[i].Seq == i+1
	reads int
	fail  error
}

func (c *logCore) Read(_ context.Context, _ string, after int64, limit int) ([]event.Event, error) {
	c.reads++
	if c.fail != nil {
		return nil, c.fail
	}
	end := min(int(after)+limit, len(c.log))
	if int(after) >= end {
		return nil, nil
	}
	return c.log[after:end], nil
}

func newLog(payloads ...event.Payload) *logCore {
	c := &logCore{}
	for i, p := range payloads {
		e := event.New("t", "r", p)
		e.Seq = int64(i + 1)
		c.log = append(c.log, e)
	}
	return c
}

// A message in progress when a watcher starts is read back from the log
// to its start, across pages and past other messages' events.
func TestResolveReadsTheStartBack(t *testing.T) {
	var payloads []event.Payload
	payloads = append(payloads, event.MessageStarted{MessageID: "old"}, event.MessageDelta{MessageID: "old", Text: "no"},
		event.MessageCompleted{MessageID: "old", Text: "no"}, event.MessageStarted{MessageID: "m"})
	var want strings.Builder
	for i := range 3 * readBackPage {
		text := string(rune('a' + i%26))
		want.WriteString(text)
		payloads = append(payloads, event.MessageDelta{MessageID: "m", Text: text})
		if i%100 == 0 {
			payloads = append(payloads, event.Usage{}, event.MessageDelta{MessageID: "other", Text: "-"})
		}
	}
	core := newLog(payloads...)
	next := int64(len(core.log) + 1) // the first delta the watcher sees

	tx := newTexts()
	m := tx.delta("r", next, event.MessageDelta{MessageID: "m", Text: "!"})
	cl := &client{chunks: true}
	require.NoError(t, m.resolve(context.Background(), core, "t", "m"))
	assert.Equal(t, want.String()+"!", m.unsent(cl))
	assert.Greater(t, core.reads, 3, "read back page by page")
	reads := core.reads
	require.NoError(t, m.resolve(context.Background(), core, "t", "m"))
	assert.Equal(t, reads, core.reads, "resolved once")

	// A message seen from its start needs no reading.
	tx.start("r", "n")
	n := tx.delta("r", next+1, event.MessageDelta{MessageID: "n", Text: "fresh"})
	require.NoError(t, n.resolve(context.Background(), core, "t", "n"))
	assert.Equal(t, reads, core.reads)
}

// When the log cannot be read, the sockets get the message from where
// the watcher met it, and its end adds nothing to what they were sent.
func TestResolveFailureSendsFromHere(t *testing.T) {
	core := newLog(event.MessageStarted{MessageID: "m"}, event.MessageDelta{MessageID: "m", Text: "lost "})
	core.fail = errors.New("store down")
	tx := newTexts()
	m := tx.delta("r", 3, event.MessageDelta{MessageID: "m", Text: "kept"})
	require.Error(t, m.resolve(context.Background(), core, "t", "m"))
	cl, fresh := &client{chunks: true}, &client{chunks: true}
	assert.Equal(t, "kept", m.unsent(cl))
	_, ok := m.rest(cl, "lost kept")
	assert.False(t, ok)
	rest, ok := m.rest(fresh, "lost kept")
	assert.True(t, ok)
	assert.Equal(t, "lost kept", rest)

	// A log without the message's start is an error too.
	core = newLog(event.MessageDelta{MessageID: "m", Text: "orphan"})
	_, err := readBack(context.Background(), core, "t", "m", 2)
	assert.ErrorContains(t, err, "no message.started")
}
