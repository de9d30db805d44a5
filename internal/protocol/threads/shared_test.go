package threads

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentwire/agentwire/internal/sse"
)

func TestSharedEventsKeepsTheLatest(t *testing.T) {
	c := newSharedEvents()
	for i := range sharedEventsSize + 10 {
		c.put(fmt.Sprint(i), sse.Event{ID: fmt.Sprint(i), Data: "x"})
	}
	for i := range 10 {
		_, ok := c.get(fmt.Sprint(i))
		assert.False(t, ok, "event %d should have been let go", i)
	}
	for i := 10; i < sharedEventsSize+10; i++ {
		e, ok := c.get(fmt.Sprint(i))
		assert.True(t, ok, "event %d", i)
		assert.Equal(t, fmt.Sprint(i), e.ID)
	}
	assert.Len(t, c.byID, sharedEventsSize)

	// A second put of one id keeps the first encoding and the ring intact.
	c.put("20", sse.Event{ID: "other"})
	e, _ := c.get("20")
	assert.Equal(t, "20", e.ID)
	assert.Len(t, c.byID, sharedEventsSize)

	// Large events and events without a log id are not kept.
	c.put("big", sse.Event{Data: strings.Repeat("x", sharedEventMax+1)})
	c.put("", sse.Event{Data: "x"})
	_, ok := c.get("big")
	assert.False(t, ok)
	_, ok = c.get("")
	assert.False(t, ok)
}
