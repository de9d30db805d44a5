package agent

import (
	"strings"
	"sync"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/llm"
)

// What the strategies other than react share: structured side calls
// (structured.go), call ids unique within a run, and forks of a run for
// got's sub-tasks, whose events a stage keeps in one piece per node.

// withInstruction is the run's system prompt followed by a strategy
// step's instruction.
func (r *run) withInstruction(instruction string) string {
	if r.system == "" {
		return instruction
	}
	return r.system + "\n\n" + instruction
}

// memory is a thread's approve-always keys, as a run knows them.
type memory struct {
	mu   sync.Mutex
	keys map[string]bool
}

func (m *memory) has(key string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.keys[key]
}

func (m *memory) add(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.keys[key] = true
}

// callIDs makes the tool call ids of a run unique: a model may repeat one
// (the scripted model derives them from the conversation, which tot's
// candidates and got's sub-tasks share), and a thread's log must not.
type callIDs struct {
	mu   sync.Mutex
	seen map[string]bool
}

// claim returns id, or a new id when id is empty or taken.
func (c *callIDs) claim(id string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id == "" || c.seen[id] {
		id = "call_" + event.NewID()
	}
	c.seen[id] = true
	return id
}

// fork returns a run for a sub-task of r: the same journal, inbox, model
// and tools, its own transcript and system prompt, and events that go
// out through v. It never compacts: a summary of a sub-task's transcript
// would replace the thread's in later runs. It shares r's approve-always
// memory: an approval for good in one sub-task holds in the others.
func (r *run) fork(system string, msgs []llm.Message, v *voice) *run {
	f := *r
	f.system = system
	f.msgs = msgs
	f.lastReply = ""
	f.lastUsage = llm.Usage{}
	f.calib = calibration{}
	f.compactFailed = true
	f.voice = v
	return &f
}

// stage lets one got node at a time write its events, so that a node's
// span (got.node.started to its end) is not interleaved with another's:
// protocols that number node spans (Loom's node_id) see each node whole.
// The node on stage writes as it goes. The others keep their events: a
// node takes the stage at its next event once it is free, or waits for it
// when it must be heard (a tool about to run, an approval to ask); a node
// that ends off stage leaves its events in a queue, written in order as
// soon as the stage is free, so that its goroutine never waits to end.
type stage struct {
	mu     sync.Mutex
	free   *sync.Cond // signalled when holder becomes nil
	holder *voice
	queue  [][]event.Payload
}

func newStage() *stage {
	st := &stage{}
	st.free = sync.NewCond(&st.mu)
	return st
}

// voice is one node's way onto the stage; st.mu guards it.
type voice struct {
	st  *stage
	buf []event.Payload
}

// say writes p, or keeps it while another node is on stage.
func (v *voice) say(em *emitter, p event.Payload) {
	v.st.mu.Lock()
	defer v.st.mu.Unlock()
	if v.st.holder == nil {
		v.st.holder = v
		v.write(em)
	}
	if v.st.holder != v {
		v.buf = append(v.buf, p)
		return
	}
	_ = em.emit(p)
}

// takeStage waits for the stage and writes what the node kept.
func (v *voice) takeStage(em *emitter) {
	v.st.mu.Lock()
	defer v.st.mu.Unlock()
	for v.st.holder != nil && v.st.holder != v {
		v.st.free.Wait()
	}
	v.st.holder = v
	v.write(em)
}

// leave ends the node's part: its events are written, or queued behind
// the node on stage.
func (v *voice) leave(em *emitter) {
	st := v.st
	st.mu.Lock()
	defer st.mu.Unlock()
	switch st.holder {
	case v:
		st.holder = nil
		st.release(em)
	case nil:
		v.write(em)
	default:
		if len(v.buf) > 0 {
			st.queue = append(st.queue, v.buf)
			v.buf = nil
		}
	}
}

func (v *voice) write(em *emitter) {
	for _, p := range v.buf {
		_ = em.emit(p)
	}
	v.buf = nil
}

// release writes the queue, then lets a waiting node on; st.mu is held.
func (st *stage) release(em *emitter) {
	for _, ps := range st.queue {
		for _, p := range ps {
			_ = em.emit(p)
		}
	}
	st.queue = nil
	st.free.Broadcast()
}

// announce writes p from the graph's scheduler, between nodes' spans (or
// queued behind the node on stage).
func (st *stage) announce(r *run, p event.Payload) {
	if r.superseded() {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.holder != nil {
		st.queue = append(st.queue, []event.Payload{p})
		return
	}
	_ = r.em.emit(p)
}

// toolsFailed reports whether the tool results after r.msgs[from] are all
// errors, and the first of them.
func toolsFailed(msgs []llm.Message) (bool, string) {
	n, first := 0, ""
	for _, m := range msgs {
		if m.Role != llm.RoleTool {
			continue
		}
		if !m.IsError {
			return false, ""
		}
		if n++; n == 1 {
			first = m.Content
		}
	}
	return n > 0, first
}

// clip cuts s to n bytes at a rune boundary, marking the cut.
func clip(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}
