package runs

import (
	"context"
	"sync"
	"time"

	"github.com/agentwire/agentwire/internal/event"
)

// Idempotent client commands: a post or an answer that carries the
// client's key (Input.Key, event.Command.Key) is carried out once per
// thread; the same key again, a retry after a reconnect, gets what the
// first got. Posts are found by their key in the thread's recent log (the
// user message records it) and, while they wait in a queue, in this
// node's memory; answers in this node's memory.

// keyWindow is how long this node remembers a key; keyLogWindow how many
// of a thread's last events a post's key is looked for in.
const (
	keyWindow    = 15 * time.Minute
	keyLogWindow = 500
	keysMax      = 100_000
)

// keys remembers the keys of recent posts and answers.
type keys struct {
	mu   sync.Mutex
	seen map[string]keyed // thread + "\x00" + key
}

type keyed struct {
	posted Posted
	at     time.Time
}

func (k *keys) get(thread, key string) (Posted, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	e, ok := k.seen[thread+"\x00"+key]
	if !ok || time.Since(e.at) > keyWindow {
		return Posted{}, false
	}
	return e.posted, true
}

func (k *keys) put(thread, key string, p Posted) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.seen == nil {
		k.seen = map[string]keyed{}
	}
	if len(k.seen) >= keysMax {
		for id, e := range k.seen {
			if time.Since(e.at) > keyWindow {
				delete(k.seen, id)
			}
		}
		if len(k.seen) >= keysMax {
			clear(k.seen) // a flood of keys: forget them rather than grow
		}
	}
	k.seen[thread+"\x00"+key] = keyed{posted: p, at: time.Now()}
}

// postedBefore returns what became of the thread's post with key, if
// there was one: from the user message that recorded it among the
// thread's last keyLogWindow events, else, for a post still queued, from
// this node's memory.
func (m *Manager) postedBefore(ctx context.Context, thread, key string) (Posted, bool, error) {
	last, err := m.cfg.Log.LastSeq(ctx, thread)
	if err != nil {
		return Posted{}, false, err
	}
	if last > 0 {
		evs, err := m.cfg.Log.Read(ctx, thread, max(0, last-keyLogWindow), keyLogWindow)
		if err != nil {
			return Posted{}, false, err
		}
		for i := len(evs) - 1; i >= 0; i-- {
			if u, ok := evs[i].Payload.(event.MessageUser); ok && u.Key == key {
				return Posted{Run: evs[i].Run, MessageID: u.MessageID, Duplicate: true, Seq: evs[i].Seq}, true, nil
			}
		}
	}
	// Not in the log yet: waiting in a queue, posted here.
	if p, ok := m.keys.get(thread, key); ok {
		p.Duplicate = true
		return p, true, nil
	}
	return Posted{}, false, nil
}
