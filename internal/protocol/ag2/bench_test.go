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
