package llmtest

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/agentwire/agentwire/internal/llm"
)

// recorder is a testing.TB that notes failures instead of failing.
type recorder struct {
	testing.TB
	failures []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

// check runs CheckStream on chunks and returns its failures.
func check(t *testing.T, chunks []llm.Chunk) []string {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		CheckStream(r, chunks)
	}()
	<-done
	return r.failures
}

func TestCheckStream(t *testing.T) {
	start := func(i int) llm.Chunk { return llm.Chunk{Type: llm.ChunkToolStart, Index: i, CallID: "c", Name: "n"} }
	delta := func(i int, a string) llm.Chunk { return llm.Chunk{Type: llm.ChunkToolDelta, Index: i, Arguments: a} }
	done := func(i int, a string) llm.Chunk {
		return llm.Chunk{Type: llm.ChunkToolDone, Index: i, CallID: "c", Name: "n", Arguments: a}
	}
	usage := llm.Chunk{Type: llm.ChunkUsage}
	finish := llm.Chunk{Type: llm.ChunkFinish, Finish: llm.FinishStop}
	text := llm.Chunk{Type: llm.ChunkText, Text: "x"}

	for _, tc := range []struct {
		name   string
		chunks []llm.Chunk
		ok     bool
	}{
		{"valid", []llm.Chunk{text, start(0), delta(0, `{"a"`), delta(0, `:1}`), done(0, `{"a":1}`), start(1), done(1, "{}"), usage, finish}, true},
		{"empty", nil, false},
		{"no finish", []llm.Chunk{text}, false},
		{"finish not last", []llm.Chunk{finish, text, finish}, false},
		{"finish without reason", []llm.Chunk{{Type: llm.ChunkFinish}}, false},
		{"two usages", []llm.Chunk{usage, usage, finish}, false},
		{"delta before start", []llm.Chunk{delta(0, "{}"), start(0), done(0, "{}"), finish}, false},
		{"start without name", []llm.Chunk{{Type: llm.ChunkToolStart, CallID: "c"}, done(0, "{}"), finish}, false},
		{"call skipped", []llm.Chunk{start(1), done(1, "{}"), finish}, false},
		{"never done", []llm.Chunk{start(0), finish}, false},
		{"done twice", []llm.Chunk{start(0), done(0, "{}"), done(0, "{}"), finish}, false},
		{"delta after done", []llm.Chunk{start(0), done(0, "{}"), delta(0, "x"), finish}, false},
		{"arguments not deltas", []llm.Chunk{start(0), delta(0, `{"a":1}`), done(0, `{"a":2}`), finish}, false},
		{"arguments not JSON", []llm.Chunk{start(0), done(0, ""), finish}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			failures := check(t, tc.chunks)
			if tc.ok && len(failures) > 0 {
				t.Errorf("CheckStream(%+v) failed: %v", tc.chunks, failures)
			}
			if !tc.ok && len(failures) == 0 {
				t.Errorf("CheckStream(%+v) passed, want a failure", tc.chunks)
			}
		})
	}
}
