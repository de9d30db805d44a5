package agentloop

import (
	"fmt"
	"testing"
	"time"

	"github.com/agentwire/agentwire/internal/event"
)

// turnEvents is a thread of n turns, each a user message, a reasoning
// block, a reply, a tool call and its output, and the run's end.
func turnEvents(n int) []event.Event {
	var evs []event.Event
	add := func(run string, p event.Payload) {
		evs = append(evs, event.Event{Seq: int64(len(evs) + 1), ID: fmt.Sprintf("e%d", len(evs)), Run: run, Time: time.Unix(0, 0), Payload: p})
	}
	for i := range n {
		run, msg := fmt.Sprintf("r%d", i), fmt.Sprintf("m%d", i)
		add(run, event.RunStarted{})
		add(run, event.MessageUser{MessageID: "u" + msg, Text: "look around"})
		add(run, event.ReasoningCompleted{ReasoningID: "t" + msg, Text: "I should look at the folder first.", DurationMS: 120})
		add(run, event.MessageCompleted{MessageID: msg, Role: event.RoleAssistant, Text: "Listing the folder."})
		add(run, event.ToolCallCompleted{CallID: "c" + msg, Name: "bash", Arguments: []byte(`{"command":"ls -1"}`)})
		add(run, event.ToolExecStarted{CallID: "c" + msg, Name: "bash"})
		add(run, event.ToolExecCompleted{CallID: "c" + msg, Name: "bash", Result: "a.txt\nb.txt\n", DurationMS: 12})
		add(run, event.MessageCompleted{MessageID: msg + "b", Role: event.RoleAssistant, Text: "Done looking."})
		add(run, event.RunCompleted{Reason: "final_answer"})
	}
	return evs
}

// BenchmarkFanOut is what the frames of ten turns cost the server on each
// of 100 connections of one thread, each with its own projector as on a
// real connection: "unshared" has every connection encode every frame
// (before), "shared" the path now, where the connections take each
// frame's bytes from the thread's shared frames and only the first
// encodes it. The network is excluded.
func BenchmarkFanOut(b *testing.B) {
	const conns = 100
	evs := turnEvents(10)
	h := &Handler{frames: newSharedFrames()}
	for _, shared := range []bool{false, true} {
		b.Run(map[bool]string{false: "unshared", true: "shared"}[shared], func(b *testing.B) {
			b.ReportAllocs()
			deliveries := 0
			for b.Loop() {
				ss := make([]*session, conns)
				for i := range ss {
					ss[i] = &session{h: h, thread: "t", proj: newProjector(0)}
					if shared {
						ss[i].frames = h.frames.Join("t")
					}
				}
				for _, e := range evs {
					for _, s := range ss {
						for _, f := range s.proj.frames(e) {
							var ok bool
							if shared {
								_, ok = s.frames.Frame(f.key, func() ([]byte, bool) { return s.encode(f.withID()) })
							} else {
								_, ok = s.encode(f.withID())
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
