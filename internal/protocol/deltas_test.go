package protocol_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/protocol"
)

func preview(after int64, stream, text string, offset int64) event.Event {
	return event.Event{Preview: after, Payload: event.MessageDelta{MessageID: stream, Text: text, Offset: offset}}
}

func committed(seq int64, stream, text string, offset int64) event.Event {
	return event.Event{Seq: seq, Payload: event.MessageDelta{MessageID: stream, Text: text, Offset: offset}}
}

// TestDeltasShowEachByteOnce feeds a consumer previews and commits in the
// orders a subscription can bring them, and checks what it shows and the
// resume positions it reports.
func TestDeltasShowEachByteOnce(t *testing.T) {
	var d protocol.Deltas
	var shown string
	show := func(e event.Event) (bool, bool) {
		out, ok, cut := d.Show(e)
		if ok {
			if delta, isDelta := event.AsDelta(out.Payload); isDelta {
				shown += delta.Text
			}
		}
		return ok, cut
	}

	ok, _ := show(committed(4, "m1", "Hel", 0)) // committed before previews began
	require.True(t, ok)
	assert.Equal(t, "4", d.Position(4).String())
	ok, _ = show(preview(4, "m1", "lo ", 3))
	require.True(t, ok)
	ok, _ = show(preview(4, "m1", "the", 6))
	require.True(t, ok)
	assert.Equal(t, "4:m1:9", d.Position(4).String(), "ahead of the log by the previews")
	ok, _ = show(preview(4, "m1", "xx", 20))
	assert.False(t, ok, "a preview past a missed one waits for its commit")

	ok, _ = show(committed(5, "m1", "lo the", 3)) // what was previewed
	assert.False(t, ok, "nothing new")
	ok, cut := show(committed(6, "m1", "re.", 9))
	assert.True(t, ok)
	assert.False(t, cut)
	assert.Equal(t, "6", d.Position(6).String(), "the log has caught up")

	ok, _ = show(preview(6, "m1", "!!", 12))
	require.True(t, ok)
	ok, cut = show(committed(7, "m1", "!!??", 12)) // the commit brings more
	assert.True(t, ok)
	assert.True(t, cut, "only the part not previewed")
	assert.Equal(t, "Hello there.!!??", shown)

	// A new stream begins with a preview at offset 0; not mid-stream.
	ok, _ = show(preview(9, "m2", "b", 1))
	assert.False(t, ok)
	ok, _ = show(preview(9, "m2", "a", 0))
	assert.True(t, ok)
	ok, _ = show(event.Event{Seq: 10, Payload: event.MessageCompleted{MessageID: "m2", Text: "a"}})
	assert.True(t, ok, "events that are not deltas pass")

	// A mark previewed is shown once: its commit, known by its id, is not.
	started := event.Event{ID: "e1", Preview: 10, Payload: event.MessageStarted{MessageID: "m3"}}
	ok, _ = show(started)
	assert.True(t, ok)
	started.Preview, started.Seq = 0, 11
	ok, _ = show(started)
	assert.False(t, ok, "the commit of a previewed mark")
	ok, _ = show(started)
	assert.True(t, ok, "an event not previewed passes")
}

// TestPositionsRoundTrip parses what Position prints, and resumes with it.
func TestPositionsRoundTrip(t *testing.T) {
	for _, s := range []string{"0", "42", "42:01JABCDEF:17"} {
		p, err := protocol.ParsePosition(s)
		require.NoError(t, err, s)
		assert.Equal(t, s, p.String())
	}
	for _, s := range []string{"", "-1", "x", "4:", "4:m", "4::3", "4:m:0", "4:m:x", "4:m:-2"} {
		_, err := protocol.ParsePosition(s)
		assert.Error(t, err, "%q", s)
	}
	p, err := protocol.ParsePosition("8:m1:5")
	require.NoError(t, err)
	d := p.Resume()
	out, ok, cut := d.Show(committed(9, "m1", "Hello there.", 0))
	require.True(t, ok)
	assert.True(t, cut)
	assert.Equal(t, " there.", out.Payload.(event.MessageDelta).Text, "the first 5 bytes were shown before the resume")
}
