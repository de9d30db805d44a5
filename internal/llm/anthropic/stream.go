package anthropic

import (
	"context"
	"crypto/rand"
	"log/slog"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go"

	"github.com/agentwire/agentwire/internal/llm"
)

// turn turns the events of one streamed message into llm.Chunks.
type turn struct {
	yield func(llm.Chunk, error) bool
	log   *slog.Logger
	// structured names the tool whose input is the answer
	// (llm.Request.Structured): its input streams as text.
	structured string
	// blocks are the open content blocks by their index in the message.
	blocks  map[int64]*block
	calls   int
	usage   llm.Usage
	finish  llm.FinishReason
	stopped bool
}

// block is an open content block: a tool call, whose arguments are
// assembled from their deltas, or thinking, whose signature is.
type block struct {
	kind      string
	index     int // the call's position in the turn
	id, name  string
	text      strings.Builder
	signature string
}

// event handles one stream event; false means the consumer stopped.
func (t *turn) event(ctx context.Context, ev sdk.MessageStreamEventUnion) bool {
	switch ev.Type {
	case "message_start":
		u := ev.Message.Usage
		t.usage.PromptTokens = u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
		t.usage.CompletionTokens = u.OutputTokens
	case "content_block_start":
		return t.start(ctx, ev.Index, ev.ContentBlock)
	case "content_block_delta":
		return t.delta(ev.Index, ev.Delta)
	case "content_block_stop":
		return t.stop(ev.Index)
	case "message_delta":
		if ev.Delta.StopReason != "" {
			t.finish = finishReason(ev.Delta.StopReason)
		}
		u := ev.Usage
		if u.JSON.InputTokens.Valid() && u.InputTokens+u.CacheCreationInputTokens+u.CacheReadInputTokens > 0 {
			t.usage.PromptTokens = u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
		}
		t.usage.CompletionTokens = u.OutputTokens
	case "message_stop":
		t.stopped = true
	}
	return true
}

func (t *turn) start(ctx context.Context, index int64, cb sdk.ContentBlockStartEventContentBlockUnion) bool {
	if t.blocks == nil {
		t.blocks = map[int64]*block{}
	}
	b := &block{kind: cb.Type}
	t.blocks[index] = b
	switch cb.Type {
	case "text":
		return cb.Text == "" || t.yield(llm.Chunk{Type: llm.ChunkText, Text: cb.Text}, nil)
	case "thinking":
		b.signature = cb.Signature
		return cb.Thinking == "" || t.yield(llm.Chunk{Type: llm.ChunkReasoning, Text: cb.Thinking}, nil)
	case "tool_use":
		if t.structured != "" && cb.Name == t.structured {
			b.kind = "answer"
			return true
		}
		b.index, b.id, b.name = t.calls, cb.ID, cb.Name
		t.calls++
		if b.id == "" {
			b.id = "toolu_" + rand.Text()
		}
		return t.yield(llm.Chunk{Type: llm.ChunkToolStart, Index: b.index, CallID: b.id, Name: b.name}, nil)
	default:
		// redacted_thinking and server tools: llm.Message cannot carry them
		// back, so they are left out.
		t.log.WarnContext(ctx, "anthropic: content block left out", "type", cb.Type)
	}
	return true
}

func (t *turn) delta(index int64, d sdk.MessageStreamEventUnionDelta) bool {
	b := t.blocks[index]
	switch d.Type {
	case "text_delta":
		return d.Text == "" || t.yield(llm.Chunk{Type: llm.ChunkText, Text: d.Text}, nil)
	case "thinking_delta":
		return d.Thinking == "" || t.yield(llm.Chunk{Type: llm.ChunkReasoning, Text: d.Thinking}, nil)
	case "signature_delta":
		if b != nil {
			b.signature += d.Signature
		}
	case "input_json_delta":
		if b != nil && b.kind == "answer" {
			return d.PartialJSON == "" || t.yield(llm.Chunk{Type: llm.ChunkText, Text: d.PartialJSON}, nil)
		}
		if b == nil || b.kind != "tool_use" || d.PartialJSON == "" {
			return true
		}
		b.text.WriteString(d.PartialJSON)
		return t.yield(llm.Chunk{Type: llm.ChunkToolDelta, Index: b.index, Arguments: d.PartialJSON}, nil)
	}
	return true
}

func (t *turn) stop(index int64) bool {
	b := t.blocks[index]
	delete(t.blocks, index)
	if b == nil {
		return true
	}
	switch b.kind {
	case "thinking":
		return b.signature == "" || t.yield(llm.Chunk{Type: llm.ChunkReasoningSignature, Signature: b.signature}, nil)
	case "tool_use":
		args := b.text.String()
		if strings.TrimSpace(args) == "" {
			args = "{}"
		}
		return t.yield(llm.Chunk{Type: llm.ChunkToolDone, Index: b.index, CallID: b.id, Name: b.name, Arguments: args}, nil)
	}
	return true
}

// end sends the usage and the final chunk; false means the consumer stopped.
func (t *turn) end() bool {
	switch {
	case t.finish == "":
		t.finish = llm.FinishOther
	case t.finish == llm.FinishToolCalls && t.calls == 0:
		t.finish = llm.FinishStop // the structured answer's tool: no call
	}
	return t.yield(llm.Chunk{Type: llm.ChunkUsage, Usage: t.usage}, nil) &&
		t.yield(llm.Chunk{Type: llm.ChunkFinish, Finish: t.finish}, nil)
}

func finishReason(r sdk.StopReason) llm.FinishReason {
	switch r {
	case sdk.StopReasonEndTurn, sdk.StopReasonStopSequence:
		return llm.FinishStop
	case sdk.StopReasonToolUse:
		return llm.FinishToolCalls
	case sdk.StopReasonMaxTokens, sdk.StopReasonModelContextWindowExceeded:
		return llm.FinishLength
	case sdk.StopReasonRefusal:
		return llm.FinishFiltered
	default:
		return llm.FinishOther
	}
}
