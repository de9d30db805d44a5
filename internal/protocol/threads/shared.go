package threads

import (
	"sync"

	"github.com/agentwire/agentwire/internal/protocol"
	"github.com/agentwire/agentwire/internal/sse"
)

// sharedEvents holds the SSE events recently encoded for log events, by
// the log event's id, so that the streams of a thread encode and check
// each event once however many of them show it: what an event shows as
// depends on the event alone (the projector's state decides only whether
// it is shown). It keeps the last sharedEventsSize events, and none whose
// data is large (a big tool result is rarely watched by many streams, and
// would crowd the cache).
type sharedEvents struct {
	mu   sync.Mutex
	byID map[sharedKey]sse.Frame
	ring []sharedKey // keys in insertion order; next is overwritten first
	next int
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
	sharedEventsSize = 4096
	sharedEventMax   = 16 << 10 // bytes of data
)

func newSharedEvents() *sharedEvents {
	return &sharedEvents{byID: make(map[sharedKey]sse.Frame, sharedEventsSize), ring: make([]sharedKey, sharedEventsSize)}
}

func (c *sharedEvents) get(k sharedKey) (sse.Frame, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byID[k]
	return e, ok
}

func (c *sharedEvents) put(k sharedKey, e sse.Frame) {
	if k.id == "" || len(e.Bytes()) > sharedEventMax {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byID[k]; ok {
		return
	}
	if old := c.ring[c.next]; old.id != "" {
		delete(c.byID, old)
	}
	c.ring[c.next] = k
	c.next = (c.next + 1) % len(c.ring)
	c.byID[k] = e
}
