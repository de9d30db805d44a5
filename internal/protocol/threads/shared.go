package threads

import (
	"sync"
	"sync/atomic"

	"github.com/agentwire/agentwire/internal/protocol"
	"github.com/agentwire/agentwire/internal/sse"
)

// sharedFrames is what the open streams of one thread on this node share:
// the SSE frames recently encoded for its log events, so that however many
// streams show an event it is rendered and encoded once. What an event
// shows as depends on the event alone (a stream's projector decides only
// whether it is shown). The streams of a thread take its events in the
// same order, so the few latest frames are all a stream that keeps up
// needs; one further behind encodes its own. A thread with one stream
// shares nothing, and keeps nothing. Frames whose data is large are not
// kept (a big tool result is rarely watched by many streams).
type sharedFrames struct {
	thread string
	// streams counts the thread's open streams; it changes under the
	// handler's framesMu, and is read without it.
	streams atomic.Int32

	mu   sync.Mutex
	ring [sharedFramesSize]sharedFrame // next is overwritten first
	next int
}

type sharedFrame struct {
	key sharedKey
	f   sse.Frame
}

// sharedKey names what one log event shows as: the event alone, or, ahead
// of the log, the event at the resume position its SSE id then carries
// (the streams as far ahead share it).
type sharedKey struct {
	id    string
	ahead bool
	at    protocol.Position
}

const (
	sharedFramesSize = 64
	sharedFrameMax   = 16 << 10 // bytes of a frame
)

// get returns the frame kept for k, looking from the newest.
func (s *sharedFrames) get(k sharedKey) (sse.Frame, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range len(s.ring) {
		e := &s.ring[(s.next-1-i+2*len(s.ring))%len(s.ring)]
		if e.key.id == "" {
			break
		}
		if e.key == k {
			return e.f, true
		}
	}
	return sse.Frame{}, false
}

// put keeps f as what k shows as, unless it is large or has no log id.
func (s *sharedFrames) put(k sharedKey, f sse.Frame) {
	if k.id == "" || len(f.Bytes()) > sharedFrameMax {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ring[s.next] = sharedFrame{key: k, f: f}
	s.next = (s.next + 1) % len(s.ring)
}

// joinFrames counts a stream of thread in, and returns what the thread's
// streams share.
func (h *Handler) joinFrames(thread string) *sharedFrames {
	h.framesMu.Lock()
	defer h.framesMu.Unlock()
	s := h.frames[thread]
	if s == nil {
		s = &sharedFrames{thread: thread}
		h.frames[thread] = s
	}
	s.streams.Add(1)
	return s
}

// leaveFrames counts a stream out; the last one out lets the frames go.
func (h *Handler) leaveFrames(s *sharedFrames) {
	h.framesMu.Lock()
	defer h.framesMu.Unlock()
	if s.streams.Add(-1) == 0 {
		delete(h.frames, s.thread)
	}
}

// shared reports whether another stream of the thread is open, and so
// whether frames are worth keeping.
func (s *sharedFrames) shared() bool { return s.streams.Load() > 1 }
