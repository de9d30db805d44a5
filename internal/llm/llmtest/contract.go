package llmtest

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"strings"
	"testing"
	"time"

	"github.com/agentwire/agentwire/internal/llm"
)

// Collect drains a stream, returning its chunks and the error that ended it.
// It fails the test if anything is yielded after an error.
func Collect(t testing.TB, seq iter.Seq2[llm.Chunk, error]) ([]llm.Chunk, error) {
	t.Helper()
	var (
		chunks []llm.Chunk
		err    error
	)
	for c, e := range seq {
		if err != nil {
			t.Fatalf("stream yielded %+v, %v after its error %v", c, e, err)
		}
		if e != nil {
			err = e
			continue
		}
		chunks = append(chunks, c)
	}
	return chunks, err
}

// CheckStream checks the llm.Model contract on the chunks of a stream that
// ended without error: exactly one ChunkFinish, last; at most one ChunkUsage;
// tool calls numbered from 0, each started (with id and name) before its
// deltas and done exactly once with the whole arguments, valid JSON that
// equals its deltas when there were any.
func CheckStream(t testing.TB, chunks []llm.Chunk) {
	t.Helper()
	if len(chunks) == 0 || chunks[len(chunks)-1].Type != llm.ChunkFinish {
		t.Fatalf("stream does not end with ChunkFinish: %+v", chunks)
	}
	type call struct {
		started, done bool
		args          strings.Builder
		deltas        bool
	}
	calls := map[int]*call{}
	usage := 0
	for i, c := range chunks {
		switch c.Type {
		case llm.ChunkFinish:
			if i != len(chunks)-1 {
				t.Errorf("chunk %d: ChunkFinish before the end", i)
			}
			if c.Finish == "" {
				t.Errorf("chunk %d: ChunkFinish without a reason", i)
			}
		case llm.ChunkUsage:
			usage++
		case llm.ChunkToolStart:
			if calls[c.Index] != nil {
				t.Errorf("chunk %d: call %d started twice", i, c.Index)
				continue
			}
			if c.Index != len(calls) {
				t.Errorf("chunk %d: call %d started after %d calls", i, c.Index, len(calls))
			}
			if c.CallID == "" || c.Name == "" {
				t.Errorf("chunk %d: call %d starts without id or name: %+v", i, c.Index, c)
			}
			calls[c.Index] = &call{started: true}
		case llm.ChunkToolDelta:
			k := calls[c.Index]
			if k == nil || k.done {
				t.Errorf("chunk %d: delta of call %d outside its start and done", i, c.Index)
				continue
			}
			k.deltas = true
			k.args.WriteString(c.Arguments)
		case llm.ChunkToolDone:
			k := calls[c.Index]
			if k == nil || k.done {
				t.Errorf("chunk %d: done of call %d not started or done twice", i, c.Index)
				continue
			}
			k.done = true
			if c.CallID == "" || c.Name == "" {
				t.Errorf("chunk %d: call %d done without id or name: %+v", i, c.Index, c)
			}
			if !json.Valid([]byte(c.Arguments)) {
				t.Errorf("chunk %d: call %d arguments are not JSON: %q", i, c.Index, c.Arguments)
			}
			if k.deltas && k.args.String() != c.Arguments {
				t.Errorf("chunk %d: call %d arguments %q, want its deltas %q", i, c.Index, c.Arguments, k.args.String())
			}
		}
	}
	if usage > 1 {
		t.Errorf("%d ChunkUsage, want at most one", usage)
	}
	for i, k := range calls {
		if !k.done {
			t.Errorf("call %d never done", i)
		}
	}
}

// Turn is a stream's chunks put together, for assertions.
type Turn struct {
	Text      string
	Reasoning string
	Signature string
	Calls     []llm.ToolCall
	Usage     *llm.Usage
	Finish    llm.FinishReason
}

// Assemble puts chunks together into a Turn.
func Assemble(chunks []llm.Chunk) Turn {
	var (
		t         Turn
		text, rsn strings.Builder
	)
	for _, c := range chunks {
		switch c.Type {
		case llm.ChunkText:
			text.WriteString(c.Text)
		case llm.ChunkReasoning:
			rsn.WriteString(c.Text)
		case llm.ChunkReasoningSignature:
			t.Signature = c.Signature
		case llm.ChunkToolDone:
			t.Calls = append(t.Calls, llm.ToolCall{ID: c.CallID, Name: c.Name, Arguments: c.Arguments})
		case llm.ChunkUsage:
			u := c.Usage
			t.Usage = &u
		case llm.ChunkFinish:
			t.Finish = c.Finish
		}
	}
	t.Text, t.Reasoning = text.String(), rsn.String()
	return t
}

// CheckCancel streams from m, whose server must send at least one chunk and
// then hang, cancels the context after the first chunk, and checks that the
// stream promptly ends with the context's error and that srv saw the request
// torn down.
func CheckCancel(t testing.TB, m llm.Model, srv *Server, req llm.Request) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var (
		n   int
		err error
	)
	for c, e := range m.Stream(ctx, req) {
		if e != nil {
			err = e
			break
		}
		if c.Type == llm.ChunkFinish {
			t.Fatalf("stream finished, want it cancelled")
		}
		n++
		cancel()
	}
	if n == 0 {
		t.Fatalf("no chunk before the cancellation (err %v)", err)
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("stream error = %v, want context.Canceled", err)
	}
	select {
	case <-srv.Gone():
	case <-time.After(10 * time.Second):
		t.Fatalf("the server never saw the request torn down")
	}
}
