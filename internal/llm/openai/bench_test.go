package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/agentwire/agentwire/internal/llm"
)

// benchStream is a streamed reply as vLLM or OpenAI sends it: a role chunk,
// tokens tokens of a few bytes each, the finish and the usage.
func benchStream(tokens int) []byte {
	var b strings.Builder
	b.WriteString(chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	for i := range tokens {
		b.WriteString(chunk(map[string]any{"content": []string{" the", " cat", " sat", " on"}[i%4]}, nil))
	}
	b.WriteString(chunk(map[string]any{}, "stop"))
	b.WriteString(usage(40, tokens))
	b.WriteString(done)
	return []byte(b.String())
}

// BenchmarkDecodeStream measures the CPU and memory of reading one streamed
// reply, per chunk: readStream (what Model.Stream uses) against the SDK's
// own ssestream and apijson decoding of the same bytes, which Model.Stream
// used before, the baseline. Each reads every field the turn uses.
func BenchmarkDecodeStream(b *testing.B) {
	const tokens = 200
	body := benchStream(tokens)
	per := func(b *testing.B) {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*(tokens+3)), "ns/chunk")
	}
	b.Run("sdk", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		var n int
		for b.Loop() {
			res := &http.Response{Header: http.Header{"Content-Type": {"text/event-stream"}},
				Body: io.NopCloser(bytes.NewReader(body))}
			s := ssestream.NewStream[oai.ChatCompletionChunk](ssestream.NewDecoder(res), nil)
			for s.Next() {
				c := s.Current()
				for _, ch := range c.Choices {
					d := ch.Delta
					n += len(d.Content) + len(d.Refusal) + len(ch.FinishReason) + len(d.ToolCalls)
					n += len(d.JSON.ExtraFields["reasoning_content"].Raw()) + len(d.JSON.ExtraFields["reasoning"].Raw())
				}
				if c.JSON.Usage.Valid() {
					n += int(c.Usage.PromptTokens)
				}
			}
			if s.Err() != nil {
				b.Fatal(s.Err())
			}
		}
		per(b)
		_ = n
	})
	b.Run("agentwire", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		var n int
		for b.Loop() {
			err := readStream(bytes.NewReader(body), func(c *completionChunk) bool {
				for _, ch := range c.Choices {
					d := ch.Delta
					n += len(d.Content) + len(d.Refusal) + len(ch.FinishReason) + len(d.ToolCalls)
					n += len(d.ReasoningContent) + len(d.Reasoning)
				}
				if c.Usage != nil {
					n += int(c.Usage.PromptTokens)
				}
				return true
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		per(b)
		_ = n
	})
}

// BenchmarkRequest measures encoding the request of a turn with a system
// prompt, a ten-message history and three tools: request (what
// Model.Stream uses) against the SDK's types and encoder, which it used
// before, the baseline (without the "stream" member it also set, so the
// baseline is the cheaper).
func BenchmarkRequest(b *testing.B) {
	m, err := New(Config{APIKey: "k", MaxTokens: 512})
	if err != nil {
		b.Fatal(err)
	}
	req := llm.Request{System: strings.Repeat("You are a careful assistant. ", 20)}
	for i := range 5 {
		req.Messages = append(req.Messages,
			llm.Message{Role: llm.RoleUser, Content: fmt.Sprintf("Question %d: what is in the file, and why?", i)},
			llm.Message{Role: llm.RoleAssistant, Content: strings.Repeat("An answer of some length. ", 8)})
	}
	for _, name := range []string{"read_file", "write_file", "list"} {
		req.Tools = append(req.Tools, llm.ToolSpec{Name: name, Description: "Does " + name + ".",
			Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"A path."}},"required":["path"]}`)})
	}
	b.Run("sdk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			p, err := m.params(req)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := p.MarshalJSON(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("request", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := m.request(req); err != nil {
				b.Fatal(err)
			}
		}
	})
}
