package protocol

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type testKey struct {
	id   string
	part int
}

// encoder counts the encodings it makes of each key.
type encoder struct {
	mu sync.Mutex
	n  map[testKey]int
}

func (e *encoder) of(k testKey, v string) func() (string, bool) {
	return func() (string, bool) {
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.n == nil {
			e.n = map[testKey]int{}
		}
		e.n[k]++
		return v, v != "fail"
	}
}

func (e *encoder) count(k testKey) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n[k]
}

func newTestFrames() *SharedFrames[testKey, string] {
	return NewSharedFrames[testKey](func(s string) int { return len(s) })
}

// TestSharedFramesKeepTheLatest: a thread's shared frames are the latest
// SharedFramesSize, found by their key; large frames, frames that could
// not be encoded and frames without a key are not kept.
func TestSharedFramesKeepTheLatest(t *testing.T) {
	r := newTestFrames()
	a, b := r.Join("t"), r.Join("t")
	defer r.Leave(a)
	defer r.Leave(b)
	var enc encoder
	key := func(i int) testKey { return testKey{id: fmt.Sprint(i)} }
	_, ok := a.Get(key(0))
	assert.False(t, ok, "nothing kept yet")
	for i := range SharedFramesSize + 10 {
		v, ok := a.Frame(key(i), enc.of(key(i), fmt.Sprint("frame ", i)))
		require.True(t, ok)
		assert.Equal(t, fmt.Sprint("frame ", i), v)
	}
	for i := 10; i < SharedFramesSize+10; i++ {
		v, ok := b.Frame(key(i), enc.of(key(i), "again"))
		require.True(t, ok)
		assert.Equal(t, fmt.Sprint("frame ", i), v, "frame %d is kept", i)
		assert.Equal(t, 1, enc.count(key(i)))
	}
	for i := range 10 {
		v, ok := b.Frame(key(i), enc.of(key(i), "again"))
		require.True(t, ok)
		assert.Equal(t, "again", v, "frame %d should have been let go", i)
		assert.Equal(t, 2, enc.count(key(i)))
	}
	other := testKey{id: "30", part: 1}
	v, _ := a.Frame(other, enc.of(other, "part 1"))
	assert.Equal(t, "part 1", v, "another part of the same event is another frame")
	v, _ = a.Get(key(30))
	assert.Equal(t, "frame 30", v)

	for _, k := range []testKey{{id: "big"}, {id: "fail"}, {}} {
		val := map[string]string{"big": strings.Repeat("x", SharedFrameMax+1), "fail": "fail", "": "own"}[k.id]
		a.Frame(k, enc.of(k, val))
		_, ok := a.Get(k)
		assert.False(t, ok, "%q is not kept", k.id)
		a.Frame(k, enc.of(k, val))
		assert.Equal(t, 2, enc.count(k), "%q is encoded by each stream", k.id)
	}
}

// TestSharedFramesFollowTheStreams: a thread's frames are shared only while
// it has more than one stream, and let go with its last.
func TestSharedFramesFollowTheStreams(t *testing.T) {
	r := newTestFrames()
	var enc encoder
	k := testKey{id: "e"}
	a := r.Join("t")
	assert.False(t, a.Shared(), "one stream shares with nobody")
	a.Frame(k, enc.of(k, "x"))
	_, ok := a.Get(k)
	assert.False(t, ok, "one stream keeps nothing")
	b := r.Join("t")
	assert.Same(t, a, b)
	assert.True(t, a.Shared())
	other := r.Join("u")
	assert.NotSame(t, a, other)
	assert.Equal(t, 2, r.Threads())
	r.Leave(b)
	assert.False(t, a.Shared())
	r.Leave(a)
	r.Leave(other)
	assert.Zero(t, r.Threads(), "the last stream out lets the frames go")
}

// TestSharedFramesEncodeOnce: streams that ask for a frame while another
// encodes it wait for that encoding rather than make their own.
func TestSharedFramesEncodeOnce(t *testing.T) {
	r := newTestFrames()
	const streams = 8
	ts := make([]*ThreadFrames[testKey, string], streams)
	for i := range ts {
		ts[i] = r.Join("t")
		defer r.Leave(ts[i])
	}
	k := testKey{id: "e"}
	var encodes atomic.Int32
	started, release := make(chan struct{}), make(chan struct{})
	got := make([]string, streams)
	var wg sync.WaitGroup
	wg.Go(func() {
		got[0], _ = ts[0].Frame(k, func() (string, bool) {
			encodes.Add(1)
			close(started)
			<-release
			return "bytes", true
		})
	})
	<-started
	for i := 1; i < streams; i++ {
		wg.Go(func() {
			got[i], _ = ts[i].Frame(k, func() (string, bool) {
				encodes.Add(1)
				return "another encoding", true
			})
		})
	}
	close(release)
	wg.Wait()
	assert.Equal(t, int32(1), encodes.Load())
	for i := range got {
		assert.Equal(t, "bytes", got[i])
	}
}
