package threads

import (
	"fmt"
	"io"
	"testing"

	"github.com/google/uuid"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/protocol"
	"github.com/agentwire/agentwire/internal/sse"
)

// BenchmarkFanOut writes 200 token events to 200 SSE streams of one
// thread. The baseline is a relay's work: each token's SSE bytes formatted
// once per stream from ready-made data. "each-encodes" is every stream
// projecting, encoding and checking every event itself (agentwire before
// the shared encodings); "shared" is the streams' path now.
func BenchmarkFanOut(b *testing.B) {
	const subscribers, tokens = 200, 200
	thread := uuid.New()
	events := make([]event.Event, tokens)
	for i := range events {
		events[i] = event.Event{Thread: thread.String(), Seq: int64(i + 1), ID: fmt.Sprintf("ev%d", i),
			Payload: event.MessageDelta{MessageID: "m1", Text: fmt.Sprintf(" token%d", i)}}
	}
	writers := make([]*sse.Writer, subscribers)
	for i := range writers {
		writers[i] = sse.NewWriter(io.Discard)
	}
	b.Run("baseline=relay", func(b *testing.B) {
		data := make([]string, tokens)
		for i, e := range events {
			data[i] = fmt.Sprintf(`{"thread_id":%q,"message_id":"m1","chunk":%q}`, thread, e.Payload.(event.MessageDelta).Text)
		}
		for b.Loop() {
			for i := range events {
				for _, w := range writers {
					_ = w.Event(sse.Event{ID: fmt.Sprint(i + 1), Type: "agent_text", Data: data[i]})
				}
			}
		}
		b.ReportMetric(float64(subscribers*tokens*b.N)/b.Elapsed().Seconds(), "deliveries/s")
	})
	b.Run("each-encodes", func(b *testing.B) {
		for b.Loop() {
			for _, e := range events {
				for _, w := range writers {
					out, _, _ := newProjector(thread).project(e)
					raw, err := EncodeEvent(out)
					if err != nil {
						b.Fatal(err)
					}
					_ = w.Event(raw)
				}
			}
		}
		b.ReportMetric(float64(subscribers*tokens*b.N)/b.Elapsed().Seconds(), "deliveries/s")
	})
	b.Run("shared", func(b *testing.B) {
		for b.Loop() {
			frames := newSharedFrames()
			shared := make([]*protocol.ThreadFrames[sharedKey, sse.Frame], subscribers)
			projectors := make([]*projector, subscribers)
			for i := range projectors {
				shared[i] = frames.Join(thread.String())
				projectors[i] = newProjector(thread)
			}
			for _, e := range events {
				for i, w := range writers {
					if ok, _ := projectors[i].shows(e); !ok {
						b.Fatal("a token that does not show")
					}
					f, ok := shared[i].Frame(sharedKey{id: e.ID}, func() (sse.Frame, bool) {
						f, err := encodeFrame(projectors[i].render(e))
						return f, err == nil
					})
					if !ok {
						b.Fatal("a token that does not encode")
					}
					_ = w.Frame(f)
				}
			}
			for _, t := range shared {
				frames.Leave(t)
			}
		}
		b.ReportMetric(float64(subscribers*tokens*b.N)/b.Elapsed().Seconds(), "deliveries/s")
	})
}
