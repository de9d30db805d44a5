package gemini

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"google.golang.org/genai"

	"github.com/agentwire/agentwire/internal/llm"
)

// turn turns the responses of one streamed call into llm.Chunks.
type turn struct {
	yield    func(llm.Chunk, error) bool
	calls    int
	usage    llm.Usage
	hasUsage bool
	finish   llm.FinishReason
	// signature is the turn's thought signature: the one on its first
	// function call, else the last one seen.
	signature  []byte
	callSigned bool
}

// response handles one streamed response; false means the consumer stopped.
func (t *turn) response(r *genai.GenerateContentResponse) bool {
	if u := r.UsageMetadata; u != nil {
		// Each response carries the totals so far; thinking is output.
		t.hasUsage = true
		t.usage = llm.Usage{
			PromptTokens:     int64(u.PromptTokenCount) + int64(u.ToolUsePromptTokenCount),
			CompletionTokens: int64(u.CandidatesTokenCount) + int64(u.ThoughtsTokenCount),
		}
	}
	if f := r.PromptFeedback; f != nil && f.BlockReason != "" {
		t.finish = llm.FinishFiltered
	}
	if len(r.Candidates) == 0 {
		return true
	}
	c := r.Candidates[0]
	if c.Content != nil {
		for _, p := range c.Content.Parts {
			if !t.part(p) {
				return false
			}
		}
	}
	if c.FinishReason != "" && c.FinishReason != genai.FinishReasonUnspecified {
		t.finish = finishReason(c.FinishReason, t.calls > 0)
	}
	return true
}

func (t *turn) part(p *genai.Part) bool {
	if len(p.ThoughtSignature) > 0 && !t.callSigned {
		t.signature = p.ThoughtSignature
		t.callSigned = p.FunctionCall != nil
	}
	switch {
	case p.Thought:
		return p.Text == "" || t.yield(llm.Chunk{Type: llm.ChunkReasoning, Text: p.Text}, nil)
	case p.FunctionCall != nil:
		return t.call(p.FunctionCall)
	case p.Text != "":
		return t.yield(llm.Chunk{Type: llm.ChunkText, Text: p.Text}, nil)
	}
	return true
}

// call sends a whole function call as its start, one delta and its done.
func (t *turn) call(fc *genai.FunctionCall) bool {
	i := t.calls
	t.calls++
	id := fc.ID
	if id == "" {
		id = syntheticID + rand.Text()
	}
	args := "{}"
	if len(fc.Args) > 0 {
		b, err := json.Marshal(fc.Args)
		if err != nil {
			t.yield(llm.Chunk{}, fmt.Errorf("gemini: arguments of %s: %w", fc.Name, err))
			return false
		}
		args = string(b)
	}
	return t.yield(llm.Chunk{Type: llm.ChunkToolStart, Index: i, CallID: id, Name: fc.Name}, nil) &&
		t.yield(llm.Chunk{Type: llm.ChunkToolDelta, Index: i, Arguments: args}, nil) &&
		t.yield(llm.Chunk{Type: llm.ChunkToolDone, Index: i, CallID: id, Name: fc.Name, Arguments: args}, nil)
}

// end sends the signature, the usage and the final chunk; false means the
// consumer stopped.
func (t *turn) end() bool {
	if len(t.signature) > 0 {
		sig := base64.StdEncoding.EncodeToString(t.signature)
		if !t.yield(llm.Chunk{Type: llm.ChunkReasoningSignature, Signature: sig}, nil) {
			return false
		}
	}
	if t.hasUsage && !t.yield(llm.Chunk{Type: llm.ChunkUsage, Usage: t.usage}, nil) {
		return false
	}
	return t.yield(llm.Chunk{Type: llm.ChunkFinish, Finish: t.finish}, nil)
}

// finishReason maps Gemini's reason; it says STOP after function calls too.
func finishReason(r genai.FinishReason, calls bool) llm.FinishReason {
	switch r {
	case genai.FinishReasonStop:
		if calls {
			return llm.FinishToolCalls
		}
		return llm.FinishStop
	case genai.FinishReasonMaxTokens:
		return llm.FinishLength
	case genai.FinishReasonSafety, genai.FinishReasonRecitation, genai.FinishReasonBlocklist,
		genai.FinishReasonProhibitedContent, genai.FinishReasonSPII, genai.FinishReasonImageSafety,
		genai.FinishReasonImageProhibitedContent, genai.FinishReasonImageRecitation:
		return llm.FinishFiltered
	default:
		return llm.FinishOther
	}
}
