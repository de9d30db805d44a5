package main

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/agentwire/agentwire/generated/ag2api"
	"github.com/agentwire/agentwire/generated/agentchatapi"
	"github.com/agentwire/agentwire/generated/agentloopapi"
	"github.com/agentwire/agentwire/generated/loomapi"
)

// BenchmarkEncode measures the hottest frame of each WebSocket protocol
// four ways, alternating blocks of each within one benchmark so that a
// busy machine slows them alike:
//
//   - before: Encode as it was before encode_gen.go, json.Marshal through
//     MarshalJSON methods that set the const fields and marshal a
//     method-less copy by reflection, a union marshalling its variant
//     (the beforeXxx types below repeat that generated code);
//   - reflection: encoding/json by reflection alone, of the same value
//     copied once, before timing, into types without methods;
//   - Encode: the generated encoder;
//   - json.Marshal: json.Marshal of the message, which calls the
//     generated MarshalJSON and then checks and copies what it returns.
//
// It reports each way's time and allocations per frame, and the ratios;
// ns/op is Encode's.
//
//	go test -run '^$' -bench BenchmarkEncode -count 3 ./cmd/asyncapigen/
func BenchmarkEncode(b *testing.B) {
	// A token of streamed text; a message sent whole.
	token := " the quick brown"
	sentence := "The file you asked for holds 42 lines; the third one calls <parse> & returns early when the input is empty."
	eventID, nodeID, session := 1234, "run-think-2", "0193a4b2-7c1d-7e8f-9a0b-1c2d3e4f5a6b"
	runID, itemID, frameID := "01JDQ4H7R8S9T0V1W2X3Y4Z5A6", "msg_01JDQ4H7R8", "6f1c2d3e-4b5a-4697-8877-665544332211"

	chunk := loomapi.MessageChunkEvent{Content: token, ID: "think", EventID: &eventID, NodeID: &nodeID, SessionID: &session}
	text := ag2api.TextData{ChatID: session, Agent: "assistant", Content: sentence, Seq: 57}
	parts := []agentloopapi.ContentPart{{Type: "input_text", Text: sentence}}
	for _, c := range []struct {
		name     string
		protocol wireProtocol
		m        any
		before   any
	}{
		{"agentchat/agent_message", wireProtocols[0], agentchatapi.NewAgentMessageEvent(token),
			beforeAgentMessage{Message: token}},
		{"loom/run_stream_event/message_chunk", wireProtocols[2],
			loomapi.NewRunStreamEventResponse(runID, loomapi.ProtocolEvent{Value: chunk}),
			beforeRunStreamEvent{ID: runID, Event: beforeProtocolEvent{beforeMessageChunk(chunk)}}},
		{"ag2/chat.text", wireProtocols[1], ag2api.NewText(text),
			beforeText{Data: beforeTextData(text)}},
		{"agentloop/response_item", wireProtocols[3],
			agentloopapi.NewResponseItemMessage(frameID, agentloopapi.ResponseItem{Value: agentloopapi.MessageItem{ID: itemID, Role: "assistant", Content: parts}}),
			beforeResponseItemMessage{ID: frameID, Payload: beforeResponseItem{beforeMessageItem{ID: itemID, Role: "assistant",
				Content: []beforeContentPart{beforeContentPart(parts[0])}}}}},
	} {
		e := loadEnv(b, c.protocol)
		want, err := e.ref.marshal(c.m)
		if err != nil {
			b.Fatal(err)
		}
		plain, err := e.ref.inlined().plain(reflect.ValueOf(c.m))
		if err != nil {
			b.Fatal(err)
		}
		reflected := plain.Interface()
		ways := []struct {
			name string
			run  func() ([]byte, error)
		}{
			{"before", func() ([]byte, error) { return json.Marshal(c.before) }},
			{"reflection", func() ([]byte, error) { return json.Marshal(reflected) }},
			{"Encode", func() ([]byte, error) { return c.protocol.encode(c.m) }},
			{"json.Marshal", func() ([]byte, error) { return json.Marshal(c.m) }},
		}
		for _, w := range ways {
			if out, err := w.run(); err != nil || string(out) != string(want) {
				b.Fatalf("%s %s = %s, %v; want %s", c.name, w.name, out, err, want)
			}
		}
		b.Run(c.name, func(b *testing.B) {
			const block = 64
			spent := make([]time.Duration, len(ways))
			n := 0
			for ; n < b.N; n += block {
				for i, w := range ways {
					start := time.Now()
					for range block {
						if _, err := w.run(); err != nil {
							b.Fatal(err)
						}
					}
					spent[i] += time.Since(start)
				}
			}
			per := func(i int) float64 { return float64(spent[i].Nanoseconds()) / float64(n) }
			for i, w := range ways {
				b.ReportMetric(per(i), w.name+"-ns/op")
				b.ReportMetric(testing.AllocsPerRun(10, func() { _, _ = w.run() }), w.name+"-allocs/op")
			}
			b.ReportMetric(per(2)/per(0), "Encode/before")
			b.ReportMetric(per(2)/per(1), "Encode/reflection")
			b.ReportMetric(per(3)/per(0), "json.Marshal/before")
			b.ReportMetric(per(2), "ns/op")
		})
	}
}

// The generated code before encode_gen.go, for the benchmarks' frames:
// each message's MarshalJSON set its const and marshalled a method-less
// copy; a union marshalled its variant; other types had no methods.

type beforeAgentMessage agentchatapi.AgentMessageEvent

func (m beforeAgentMessage) MarshalJSON() ([]byte, error) {
	type plain beforeAgentMessage
	m.Type = "agent_message"
	return json.Marshal(plain(m))
}

type beforeMessageChunk loomapi.MessageChunkEvent

func (m beforeMessageChunk) MarshalJSON() ([]byte, error) {
	type plain beforeMessageChunk
	m.Type = "message_chunk"
	return json.Marshal(plain(m))
}

type beforeProtocolEvent struct{ Value any }

func (u beforeProtocolEvent) MarshalJSON() ([]byte, error) {
	if u.Value == nil {
		return []byte("null"), nil
	}
	return json.Marshal(u.Value)
}

type beforeRunStreamEvent struct {
	Event beforeProtocolEvent `json:"event"`
	ID    string              `json:"id"`
	Type  string              `json:"type"`
}

func (m beforeRunStreamEvent) MarshalJSON() ([]byte, error) {
	type plain beforeRunStreamEvent
	m.Type = "run_stream_event"
	return json.Marshal(plain(m))
}

type beforeTextData ag2api.TextData

type beforeText struct {
	Data      beforeTextData `json:"data"`
	Replay    *bool          `json:"replay,omitempty,omitzero"`
	Timestamp *string        `json:"timestamp,omitempty,omitzero"`
	Type      string         `json:"type"`
}

func (m beforeText) MarshalJSON() ([]byte, error) {
	type plain beforeText
	m.Type = "chat.text"
	return json.Marshal(plain(m))
}

type beforeContentPart agentloopapi.ContentPart

type beforeMessageItem struct {
	Content []beforeContentPart `json:"content"`
	ID      string              `json:"id"`
	Role    string              `json:"role"`
	Type    string              `json:"type"`
}

func (m beforeMessageItem) MarshalJSON() ([]byte, error) {
	type plain beforeMessageItem
	m.Type = "message"
	return json.Marshal(plain(m))
}

type beforeResponseItem struct{ Value any }

func (u beforeResponseItem) MarshalJSON() ([]byte, error) {
	if u.Value == nil {
		return []byte("null"), nil
	}
	return json.Marshal(u.Value)
}

type beforeResponseItemMessage struct {
	ID      string             `json:"id"`
	Payload beforeResponseItem `json:"payload"`
	Type    string             `json:"type"`
}

func (m beforeResponseItemMessage) MarshalJSON() ([]byte, error) {
	type plain beforeResponseItemMessage
	m.Type = "response_item"
	return json.Marshal(plain(m))
}
