package openai

import (
	"crypto/rand"
	"strings"

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
func (t *turn) chunk(c *completionChunk) bool {
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Index != 0 {
			continue // n is never set above 1
		}
		if !t.delta(&ch.Delta) {
			return false
		}
		if ch.FinishReason != "" && t.finish == "" {
			t.finish = finishReason(ch.FinishReason)
			if !t.completeCalls() {
				return false
			}
		}
	}
	if c.Usage != nil && !t.hasUsage {
		t.hasUsage = true
		t.usage = llm.Usage{PromptTokens: c.Usage.PromptTokens, CompletionTokens: c.Usage.CompletionTokens}
		return t.yield(llm.Chunk{Type: llm.ChunkUsage, Usage: t.usage}, nil)
	}
	return true
}

func (t *turn) delta(d *delta) bool {
	// DeepSeek, vLLM and llama.cpp send reasoning_content; Ollama and
	// OpenRouter send reasoning.
	reasoning := d.ReasoningContent
	if reasoning == "" {
		reasoning = d.Reasoning
	}
	if reasoning != "" && !t.yield(llm.Chunk{Type: llm.ChunkReasoning, Text: reasoning}, nil) {
		return false
	}
	if d.Content != "" && !t.yield(llm.Chunk{Type: llm.ChunkText, Text: d.Content}, nil) {
		return false
	}
	if d.Refusal != "" && !t.yield(llm.Chunk{Type: llm.ChunkText, Text: d.Refusal}, nil) {
		return false
	}
	for i := range d.ToolCalls {
		if !t.toolDelta(&d.ToolCalls[i]) {
			return false
		}
	}
	return true
}

func (t *turn) toolDelta(tc *toolCallDelta) bool {
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
	c.name += tc.FunctionName
	args := tc.Arguments
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
