package openai

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/go-faster/jx"

	"github.com/agentwire/agentwire/internal/sse"
)

// The stream of a completion is read here rather than by the SDK's
// ssestream and apijson: they decode every chunk into the SDK's full
// ChatCompletionChunk, with metadata for each field, which cost the server
// more CPU per token than everything else on the token path together
// (docs/BENCHMARKS.md). The SDK still builds and sends the request, retries
// it, and maps an HTTP error status to *oai.Error.

// maxChunkBytes bounds one event of the stream.
const maxChunkBytes = 16 << 20

// completionChunk is the part of a chat.completion.chunk read here.
type completionChunk struct {
	Choices []choice
	Usage   *tokenUsage // nil when absent or null
	// Error is set on an event sent in place of a chunk.
	Error bool
}

type choice struct {
	Index        int64
	Delta        delta
	FinishReason string
}

type tokenUsage struct {
	PromptTokens, CompletionTokens int64
}

type delta struct {
	Content, Refusal string
	// DeepSeek, vLLM and llama.cpp send reasoning_content; Ollama and
	// OpenRouter send reasoning.
	ReasoningContent, Reasoning string
	ToolCalls                   []toolCallDelta
}

type toolCallDelta struct {
	Index                       int64
	ID, FunctionName, Arguments string
}

// The decoders below read the fields they know and skip the rest. A field
// of another type than expected (a server's own "reasoning" object, say) is
// skipped too: the rest of the chunk is still of use. Malformed JSON is an
// error.

func (c *completionChunk) decode(d *jx.Decoder) error {
	return d.ObjBytes(func(d *jx.Decoder, key []byte) error {
		switch string(key) {
		case "choices":
			if d.Next() != jx.Array {
				return d.Skip()
			}
			return d.Arr(func(d *jx.Decoder) error {
				var ch choice
				if err := ch.decode(d); err != nil {
					return err
				}
				c.Choices = append(c.Choices, ch)
				return nil
			})
		case "usage":
			if d.Next() != jx.Object {
				return d.Skip()
			}
			c.Usage = &tokenUsage{}
			return d.ObjBytes(func(d *jx.Decoder, key []byte) error {
				switch string(key) {
				case "prompt_tokens":
					return integer(d, &c.Usage.PromptTokens)
				case "completion_tokens":
					return integer(d, &c.Usage.CompletionTokens)
				}
				return d.Skip()
			})
		case "error":
			c.Error = d.Next() != jx.Null
		}
		return d.Skip()
	})
}

func (ch *choice) decode(d *jx.Decoder) error {
	if d.Next() != jx.Object {
		return d.Skip()
	}
	return d.ObjBytes(func(d *jx.Decoder, key []byte) error {
		switch string(key) {
		case "index":
			return integer(d, &ch.Index)
		case "finish_reason":
			return str(d, &ch.FinishReason)
		case "delta":
			return ch.Delta.decode(d)
		}
		return d.Skip()
	})
}

func (dl *delta) decode(d *jx.Decoder) error {
	if d.Next() != jx.Object {
		return d.Skip()
	}
	return d.ObjBytes(func(d *jx.Decoder, key []byte) error {
		switch string(key) {
		case "content":
			return str(d, &dl.Content)
		case "refusal":
			return str(d, &dl.Refusal)
		case "reasoning_content":
			return str(d, &dl.ReasoningContent)
		case "reasoning":
			return str(d, &dl.Reasoning)
		case "tool_calls":
			if d.Next() != jx.Array {
				return d.Skip()
			}
			return d.Arr(func(d *jx.Decoder) error {
				var tc toolCallDelta
				if err := tc.decode(d); err != nil {
					return err
				}
				dl.ToolCalls = append(dl.ToolCalls, tc)
				return nil
			})
		}
		return d.Skip()
	})
}

func (tc *toolCallDelta) decode(d *jx.Decoder) error {
	if d.Next() != jx.Object {
		return d.Skip()
	}
	return d.ObjBytes(func(d *jx.Decoder, key []byte) error {
		switch string(key) {
		case "index":
			return integer(d, &tc.Index)
		case "id":
			return str(d, &tc.ID)
		case "function":
			if d.Next() != jx.Object {
				return d.Skip()
			}
			return d.ObjBytes(func(d *jx.Decoder, key []byte) error {
				switch string(key) {
				case "name":
					return str(d, &tc.FunctionName)
				case "arguments":
					return str(d, &tc.Arguments)
				}
				return d.Skip()
			})
		}
		return d.Skip()
	})
}

// str reads a string into v; a value of another type is skipped.
func str(d *jx.Decoder, v *string) error {
	if d.Next() != jx.String {
		return d.Skip()
	}
	s, err := d.Str()
	*v = s
	return err
}

// integer reads an integer into v; a value of another type, or a number
// that is not an integer, is skipped.
func integer(d *jx.Decoder, v *int64) error {
	if d.Next() != jx.Number {
		return d.Skip()
	}
	n, err := d.Num()
	if err != nil {
		return err
	}
	if i, err := n.Int64(); err == nil {
		*v = i
	}
	return nil
}

// eventError is an error event the server sent in place of a chunk.
type eventError struct {
	data []byte
}

func (e *eventError) Error() string {
	return "received error while streaming: " + string(e.data)
}

// readStream reads the server-sent events of a streamed completion from
// body and hands each chunk to fn until fn returns false, the stream sends
// [DONE] or it ends. It returns an *eventError for an error event, and the
// reader's error, but not io.EOF: whether the turn was finished is the
// chunks' to say.
func readStream(body io.Reader, fn func(*completionChunk) bool) error {
	r := sse.NewReaderSize(body, maxChunkBytes)
	d := jx.GetDecoder()
	defer jx.PutDecoder(d)
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		data := []byte(ev.Data)
		if bytes.HasPrefix(data, []byte("[DONE]")) {
			return nil
		}
		var c completionChunk
		d.ResetBytes(data)
		if err := c.decode(d); err != nil {
			return fmt.Errorf("decode a chunk: %w", err)
		}
		if c.Error {
			return &eventError{data: data}
		}
		if !fn(&c) {
			return nil
		}
	}
}
