package openai

import (
	"crypto/rand"
	"encoding/json"
	"strings"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/respjson"

	"github.com/agentwire/agentwire/internal/llm"
)

// turn turns the chunks of one streamed completion into llm.Chunks. Chat
// Completions never says when one tool call ends, so calls are completed
// when the choice finishes.
type turn struct {
	yield func(llm.Chunk, error) bool
	// calls are the turn's tool calls in order; byIndex maps the server's
	// tool_calls index to the call it currently names.
	calls    []*call
	byIndex  map[int64]*call
	finish   llm.FinishReason
	usage    llm.Usage
	hasUsage bool
}

type call struct {
	index    int
	id, name string
	args     strings.Builder
	// pending holds argument text that came before the call's name, as it
	// cannot be sent before ChunkToolStart.
	pending string
	started bool
}

// chunk handles one streamed chunk; false means the consumer stopped.
func (t *turn) chunk(c oai.ChatCompletionChunk) bool {
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue // n is never set above 1
		}
		if !t.delta(ch.Delta) {
			return false
		}
		if ch.FinishReason != "" && t.finish == "" {
			t.finish = finishReason(ch.FinishReason)
			if !t.completeCalls() {
				return false
			}
		}
	}
	if c.JSON.Usage.Valid() && !t.hasUsage {
		t.hasUsage = true
		t.usage = llm.Usage{PromptTokens: c.Usage.PromptTokens, CompletionTokens: c.Usage.CompletionTokens}
		return t.yield(llm.Chunk{Type: llm.ChunkUsage, Usage: t.usage}, nil)
	}
	return true
}

func (t *turn) delta(d oai.ChatCompletionChunkChoiceDelta) bool {
	// DeepSeek, vLLM and llama.cpp send reasoning_content; Ollama and
	// OpenRouter send reasoning.
	for _, key := range [...]string{"reasoning_content", "reasoning"} {
		if s := extraString(d.JSON.ExtraFields[key]); s != "" {
			if !t.yield(llm.Chunk{Type: llm.ChunkReasoning, Text: s}, nil) {
				return false
			}
			break
		}
	}
	if d.Content != "" && !t.yield(llm.Chunk{Type: llm.ChunkText, Text: d.Content}, nil) {
		return false
	}
	if d.Refusal != "" && !t.yield(llm.Chunk{Type: llm.ChunkText, Text: d.Refusal}, nil) {
		return false
	}
	for _, tc := range d.ToolCalls {
		if !t.toolDelta(tc) {
			return false
		}
	}
	return true
}

func (t *turn) toolDelta(tc oai.ChatCompletionChunkChoiceDeltaToolCall) bool {
	if t.byIndex == nil {
		t.byIndex = map[int64]*call{}
	}
	c := t.byIndex[tc.Index]
	// A new id at a known index is a new call: some servers number every
	// call 0.
	if c == nil || (tc.ID != "" && c.id != "" && tc.ID != c.id) {
		c = &call{index: len(t.calls)}
		t.calls = append(t.calls, c)
		t.byIndex[tc.Index] = c
	}
	if c.id == "" {
		c.id = tc.ID
	}
	c.name += tc.Function.Name
	args := tc.Function.Arguments
	if !c.started {
		if c.name == "" {
			c.pending += args
			return true
		}
		if !t.start(c) {
			return false
		}
		args = c.pending + args
		c.pending = ""
	}
	if args == "" {
		return true
	}
	c.args.WriteString(args)
	return t.yield(llm.Chunk{Type: llm.ChunkToolDelta, Index: c.index, Arguments: args}, nil)
}

func (t *turn) start(c *call) bool {
	c.started = true
	if c.id == "" {
		c.id = "call_" + rand.Text()
	}
	return t.yield(llm.Chunk{Type: llm.ChunkToolStart, Index: c.index, CallID: c.id, Name: c.name}, nil)
}

// completeCalls sends ChunkToolDone for every call, in order.
func (t *turn) completeCalls() bool {
	for _, c := range t.calls {
		if !c.started {
			if !t.start(c) {
				return false
			}
			if c.pending != "" {
				c.args.WriteString(c.pending)
				if !t.yield(llm.Chunk{Type: llm.ChunkToolDelta, Index: c.index, Arguments: c.pending}, nil) {
					return false
				}
			}
		}
		args := c.args.String()
		if strings.TrimSpace(args) == "" {
			args = "{}"
		}
		if !t.yield(llm.Chunk{Type: llm.ChunkToolDone, Index: c.index, CallID: c.id, Name: c.name, Arguments: args}, nil) {
			return false
		}
	}
	if len(t.calls) > 0 && t.finish == llm.FinishStop {
		// Ollama has been seen to finish a turn of tool calls with "stop".
		t.finish = llm.FinishToolCalls
	}
	return true
}

// end sends the final chunk; false means the consumer stopped.
func (t *turn) end() bool {
	return t.yield(llm.Chunk{Type: llm.ChunkFinish, Finish: t.finish}, nil)
}

func finishReason(r string) llm.FinishReason {
	switch r {
	case "stop":
		return llm.FinishStop
	case "tool_calls", "function_call":
		return llm.FinishToolCalls
	case "length":
		return llm.FinishLength
	case "content_filter":
		return llm.FinishFiltered
	default:
		return llm.FinishOther
	}
}

// extraString decodes a string field the SDK does not know. The SDK marks
// such fields invalid (it decoded them into nothing), so only Raw is of use.
func extraString(f respjson.Field) string {
	raw := f.Raw()
	if len(raw) < 2 || raw[0] != '"' {
		return "" // absent (as it is from most servers, on every chunk), null, or not a string
	}
	if body := raw[1 : len(raw)-1]; !strings.ContainsAny(body, `\"`) {
		return body // nothing to unescape
	}
	var s string
	if json.Unmarshal([]byte(raw), &s) != nil {
		return ""
	}
	return s
}
