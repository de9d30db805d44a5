package ag2

import (
	"fmt"
	"testing"
	"time"

	"github.com/agentwire/agentwire/internal/event"
)

// chatEvents is a chat of n turns, each a streamed reply of 20 chunks, a
// tool call and its result, and usage: about 30 events a turn.
func chatEvents(n int) []event.Event {
	var evs []event.Event
	seq := int64(0)
	add := func(run string, p event.Payload) {
		seq++
		evs = append(evs, event.Event{Seq: seq, Run: run, Time: time.Unix(0, 0), Payload: p})
	}
	for i := range n {
		run, msg := fmt.Sprintf("r%d", i), fmt.Sprintf("m%d", i)
		add(run, event.MessageUser{MessageID: "u" + msg, Text: "hello"})
		add(run, event.RunStarted{Strategy: "group"})
		add(run, event.AgentSelected{Agent: "assistant"})
		add(run, event.MessageStarted{MessageID: msg, Role: event.RoleAssistant, Agent: "assistant"})
		for range 20 {
			add(run, event.MessageDelta{MessageID: msg, Text: "word "})
		}
		add(run, event.MessageCompleted{MessageID: msg, Role: event.RoleAssistant, Agent: "assistant", Text: "word word"})
		add(run, event.ToolCallCompleted{CallID: "c" + msg, Name: "ls", Arguments: []byte(`{"path":"."}`)})
		add(run, event.ToolExecStarted{CallID: "c" + msg, Name: "ls"})
		add(run, event.ToolExecCompleted{CallID: "c" + msg, Name: "ls", Result: "a\nb", DurationMS: 1})
		add(run, event.Usage{PromptTokens: 100, CompletionTokens: 20})
		add(run, event.RunCompleted{Reason: "completed"})
	}
	return evs
}

// BenchmarkReplay is what a client.resume from the start costs the
// server for a chat of 100 turns (about 3,000 events): projecting every
// event and coalescing the chunks.
func BenchmarkReplay(b *testing.B) {
	evs := chatEvents(100)
	p, _ := loadPrices("")
	b.ReportAllocs()
	for b.Loop() {
		pr := newProjector("c", p, "gpt-4o")
		var out []frame
		for _, e := range evs {
			out = append(out, pr.Project(e)...)
		}
		out = coalesce(out)
		if len(out) == 0 {
			b.Fatal("no frames")
		}
	}
	b.ReportMetric(float64(len(evs)), "events/op")
}

// BenchmarkFanOut is what the live frames of two turns (about 60 events,
// a streamed reply of 20 chunks each) cost the server on each of 100
// sockets of one chat, each with its own projector as on a real socket:
// "unshared" has every socket encode every frame (before), "shared" the
// path now, where the sockets take each frame's bytes from the chat's
// shared frames and only the first encodes it. The network is excluded.
func BenchmarkFanOut(b *testing.B) {
	const sockets = 100
	evs := chatEvents(2)
	for i := range evs {
		evs[i].ID = fmt.Sprintf("e%d", i)
	}
	p, _ := loadPrices("")
	h := &Handler{frames: newSharedFrames()}
	for _, shared := range []bool{false, true} {
		b.Run(map[bool]string{false: "unshared", true: "shared"}[shared], func(b *testing.B) {
			b.ReportAllocs()
			deliveries := 0
			for b.Loop() {
				ss := make([]*session, sockets)
				for i := range ss {
					ss[i] = &session{h: h, workflow: "default", proj: newProjector("c", p, "gpt-4o").inWorkflow("default")}
					if shared {
						ss[i].frames = h.frames.Join("c")
					}
				}
				for _, e := range evs {
					for _, s := range ss {
						frames := s.proj.Project(e)
						if shared {
							s.keyFrames(e, frames)
						}
						for _, fr := range frames {
							var ok bool
							if shared {
								_, ok = s.frames.Frame(fr.key, func() (encoded, bool) { return s.encode(fr, false) })
							} else {
								_, ok = s.encode(fr, false)
							}
							if !ok {
								b.Fatal("a frame that does not encode")
							}
							deliveries++
						}
					}
				}
				for _, s := range ss {
					if s.frames != nil {
						h.frames.Leave(s.frames)
					}
				}
			}
			b.ReportMetric(float64(deliveries)/float64(b.N), "deliveries/op")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(deliveries), "ns/delivery")
		})
	}
}
