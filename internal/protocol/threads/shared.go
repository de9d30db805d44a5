package threads

import (
	"sync"

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
	byID map[string]sse.Event
	ring []string // ids in insertion order; next is overwritten first
	next int
}

const (
	sharedEventsSize = 4096
	sharedEventMax   = 16 << 10 // bytes of data
)

func newSharedEvents() *sharedEvents {
	return &sharedEvents{byID: make(map[string]sse.Event, sharedEventsSize), ring: make([]string, sharedEventsSize)}
}

func (c *sharedEvents) get(id string) (sse.Event, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byID[id]
	return e, ok
}

func (c *sharedEvents) put(id string, e sse.Event) {
	if id == "" || len(e.Data) > sharedEventMax {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byID[id]; ok {
		return
	}
	if old := c.ring[c.next]; old != "" {
		delete(c.byID, old)
	}
	c.ring[c.next] = id
	c.next = (c.next + 1) % len(c.ring)
	c.byID[id] = e
}
