package protocol

import (
	"sync"
	"sync/atomic"
)

// SharedFrames is what the open streams of each thread on this node share:
// the frames recently encoded for the thread's events, so that however
// many streams show an event the same way it is rendered and encoded once
// (one encode per event per wire shape). A projector names a frame whose
// bytes depend on the event alone (not on the stream's own state: its own
// messages left out, replay or live, notices meant for it, ids of its own)
// by a key K; a frame without a key is the stream's own and is encoded by
// it. The streams of a thread take its events in the same order, so the
// few latest frames are all a stream that keeps up needs; one further
// behind encodes its own. A thread with one stream shares nothing and
// keeps nothing, and frames larger than MaxBytes are not kept (a big tool
// result is rarely watched by many streams).
//
// Threads (SSE), AG2 and AgentLoop share through it; agentchat's hub
// encodes each frame once for the sockets it fans out to by itself. Loom
// has nothing to share: each socket follows only the runs it started, its
// frames carrying its own request id and event_id counters, so no two
// sockets are sent the same frame.
type SharedFrames[K comparable, V any] struct {
	size func(V) int // bytes of a frame
	mu   sync.Mutex
	ths  map[string]*ThreadFrames[K, V] // by thread, while it has open streams
}

// SharedFramesSize is how many frames a thread keeps, and SharedFrameMax
// the bytes of the largest frame kept.
const (
	SharedFramesSize = 64
	SharedFrameMax   = 16 << 10
)

// NewSharedFrames returns an empty SharedFrames; size measures a frame.
func NewSharedFrames[K comparable, V any](size func(V) int) *SharedFrames[K, V] {
	return &SharedFrames[K, V]{size: size, ths: map[string]*ThreadFrames[K, V]{}}
}

// Join counts a stream of thread in, and returns what the thread's streams
// share. Every Join is followed by a Leave.
func (r *SharedFrames[K, V]) Join(thread string) *ThreadFrames[K, V] {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.ths[thread]
	if t == nil {
		t = &ThreadFrames[K, V]{size: r.size, thread: thread}
		r.ths[thread] = t
	}
	t.streams.Add(1)
	return t
}

// Leave counts a stream out; the last one out lets the frames go.
func (r *SharedFrames[K, V]) Leave(t *ThreadFrames[K, V]) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t.streams.Add(-1) == 0 {
		delete(r.ths, t.thread)
	}
}

// Threads is how many threads have open streams.
func (r *SharedFrames[K, V]) Threads() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ths)
}

// ThreadFrames is one thread's shared frames: a ring of the latest,
// newest overwriting oldest.
type ThreadFrames[K comparable, V any] struct {
	size   func(V) int
	thread string
	// streams counts the thread's open streams; it changes under the
	// registry's mu, and is read without it.
	streams atomic.Int32

	mu   sync.Mutex
	ring [SharedFramesSize]*sharedFrame[K, V]
	next int // the slot overwritten next
}

// sharedFrame is a frame kept, or being encoded: v and ok are set, then
// ready, then done is released.
type sharedFrame[K comparable, V any] struct {
	key   K
	done  sync.WaitGroup
	ready atomic.Bool
	v     V
	ok    bool
}

// Shared reports whether another stream of the thread is open, and so
// whether frames are worth keeping.
func (t *ThreadFrames[K, V]) Shared() bool { return t.streams.Load() > 1 }

// Frame returns the frame of k: the one kept, or encode's, kept for the
// other streams. A zero k (a stream's own frame), or a thread with one
// stream, is encode's alone. Streams that ask for k while it is being
// encoded wait for that encoding, so that k is encoded once however many
// streams want it at once. ok false (encode could not) is every asker's
// answer, and nothing is kept.
func (t *ThreadFrames[K, V]) Frame(k K, encode func() (V, bool)) (V, bool) {
	var zero K
	if k == zero || !t.Shared() {
		return encode()
	}
	t.mu.Lock()
	if f := t.find(k); f != nil {
		t.mu.Unlock()
		f.done.Wait()
		return f.v, f.ok
	}
	f := &sharedFrame[K, V]{key: k}
	f.done.Add(1)
	slot := t.next
	t.ring[slot] = f
	t.next = (t.next + 1) % len(t.ring)
	t.mu.Unlock()
	defer f.done.Done()
	f.v, f.ok = encode()
	f.ready.Store(true)
	if !f.ok || t.size(f.v) > SharedFrameMax {
		t.mu.Lock()
		if t.ring[slot] == f {
			t.ring[slot] = nil
		}
		t.mu.Unlock()
	}
	return f.v, f.ok
}

// Get returns the frame kept for k, if it is kept and encoded.
func (t *ThreadFrames[K, V]) Get(k K) (V, bool) {
	t.mu.Lock()
	f := t.find(k)
	t.mu.Unlock()
	if f != nil && f.ready.Load() && f.ok {
		return f.v, true
	}
	var zero V
	return zero, false
}

// find is the newest entry of k; under mu.
func (t *ThreadFrames[K, V]) find(k K) *sharedFrame[K, V] {
	n := len(t.ring)
	for i := range n {
		if f := t.ring[(t.next-1-i+n)%n]; f != nil && f.key == k {
			return f
		}
	}
	return nil
}
