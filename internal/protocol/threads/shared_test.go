package threads

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/protocol"
	"github.com/agentwire/agentwire/internal/sse"
)

// TestSharedFramesKeepTheLatest: a thread's shared frames are the latest
// sharedFramesSize, found by their key (ahead of the log, by the position
// too); large frames and frames without a log id are not kept.
func TestSharedFramesKeepTheLatest(t *testing.T) {
	frame := func(id, data string) sse.Frame {
		f, err := sse.Encode(sse.Event{ID: id, Data: data})
		require.NoError(t, err)
		return f
	}
	var s sharedFrames
	_, ok := s.get(sharedKey{id: "0"})
	assert.False(t, ok, "nothing kept yet")
	for i := range sharedFramesSize + 10 {
		s.put(sharedKey{id: fmt.Sprint(i)}, frame(fmt.Sprint(i), "x"))
	}
	for i := range 10 {
		_, ok := s.get(sharedKey{id: fmt.Sprint(i)})
		assert.False(t, ok, "frame %d should have been let go", i)
	}
	for i := 10; i < sharedFramesSize+10; i++ {
		f, ok := s.get(sharedKey{id: fmt.Sprint(i)})
		if assert.True(t, ok, "frame %d", i) {
			assert.Equal(t, fmt.Sprint(i), f.Event().ID)
		}
	}

	ahead := sharedKey{id: "20", ahead: true, at: protocol.Position{Seq: 19, Stream: "m", Shown: 5}}
	s.put(ahead, frame("19:m:5", "y"))
	f, ok := s.get(ahead)
	require.True(t, ok)
	assert.Equal(t, "19:m:5", f.Event().ID)
	f, ok = s.get(sharedKey{id: "20"})
	require.True(t, ok)
	assert.Equal(t, "20", f.Event().ID, "the committed event's frame is another")
	_, ok = s.get(sharedKey{id: "20", ahead: true, at: protocol.Position{Seq: 19, Stream: "m", Shown: 6}})
	assert.False(t, ok, "another position")

	s.put(sharedKey{id: "big"}, frame("", strings.Repeat("x", sharedFrameMax+1)))
	s.put(sharedKey{}, frame("", "x"))
	_, ok = s.get(sharedKey{id: "big"})
	assert.False(t, ok)
	_, ok = s.get(sharedKey{})
	assert.False(t, ok)
}

// TestSharedFramesFollowTheStreams: a thread's frames are shared only while
// it has more than one stream, and let go with its last.
func TestSharedFramesFollowTheStreams(t *testing.T) {
	h := New(nil, Options{})
	a := h.joinFrames("t")
	assert.False(t, a.shared(), "one stream shares with nobody")
	b := h.joinFrames("t")
	assert.Same(t, a, b)
	assert.True(t, a.shared())
	other := h.joinFrames("u")
	assert.NotSame(t, a, other)
	h.leaveFrames(b)
	assert.False(t, a.shared())
	h.leaveFrames(a)
	h.leaveFrames(other)
	assert.Empty(t, h.frames, "the last stream out lets the frames go")
}
