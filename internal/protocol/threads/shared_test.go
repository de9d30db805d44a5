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
	frame := func(id, data string) sse.Frame {
		f, err := sse.Encode(sse.Event{ID: id, Data: data})
		assert.NoError(t, err)
		return f
	}
	for i := range sharedEventsSize + 10 {
		c.put(sharedKey{id: fmt.Sprint(i)}, frame(fmt.Sprint(i), "x"))
	}
	for i := range 10 {
		_, ok := c.get(sharedKey{id: fmt.Sprint(i)})
		assert.False(t, ok, "event %d should have been let go", i)
	}
	for i := 10; i < sharedEventsSize+10; i++ {
		e, ok := c.get(sharedKey{id: fmt.Sprint(i)})
		assert.True(t, ok, "event %d", i)
		assert.Equal(t, fmt.Sprint(i), e.Event().ID)
	}
	assert.Len(t, c.byID, sharedEventsSize)

	// A second put of one id keeps the first encoding and the ring intact.
	c.put(sharedKey{id: "20"}, frame("other", ""))
	e, _ := c.get(sharedKey{id: "20"})
	assert.Equal(t, "20", e.Event().ID)
	assert.Len(t, c.byID, sharedEventsSize)

	// Large events and events without a log id are not kept.
	c.put(sharedKey{id: "big"}, frame("", strings.Repeat("x", sharedEventMax+1)))
	c.put(sharedKey{}, frame("", "x"))
	_, ok := c.get(sharedKey{id: "big"})
	assert.False(t, ok)
	_, ok = c.get(sharedKey{})
	assert.False(t, ok)
}
