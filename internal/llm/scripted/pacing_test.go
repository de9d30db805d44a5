package scripted

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/llm"
)

// delays returns the planned delay before each chunk of the turn answering
// msgs, and the chunks' types.
func delays(t *testing.T, m *Model, msgs ...llm.Message) ([]time.Duration, []llm.ChunkType) {
	t.Helper()
	beats, err := m.plan(llm.Request{Messages: msgs})
	require.NoError(t, err)
	var d []time.Duration
	var k []llm.ChunkType
	for _, b := range beats {
		d = append(d, b.delay)
		k = append(k, b.chunk.Type)
	}
	return d, k
}

func TestPacingLevels(t *testing.T) {
	s, err := Load("testdata/pacing.yaml")
	require.NoError(t, err)
	m := New(s)
	ms := time.Millisecond

	// Scenario pacing: start delay first, chunk delay before every later
	// fragment, nothing before usage and finish.
	d, k := delays(t, m, llm.Message{Role: llm.RoleUser, Content: "slow stream"})
	require.Equal(t, llm.ChunkText, k[0])
	assert.Equal(t, 300*ms, d[0])
	for i := 1; i < len(d)-2; i++ {
		assert.Equal(t, 40*ms, d[i], "chunk %d", i)
	}
	assert.Equal(t, []llm.ChunkType{llm.ChunkUsage, llm.ChunkFinish}, k[len(k)-2:])
	assert.Equal(t, []time.Duration{0, 0}, d[len(d)-2:])

	// Rule pacing overrides the chunk delay and inherits the start delay;
	// tool starts and ends are not fragments, argument deltas are.
	d, k = delays(t, m, llm.Message{Role: llm.RoleUser, Content: "slower stream"})
	assert.Equal(t, 300*ms, d[0])
	for i := 1; i < len(k); i++ {
		switch k[i] {
		case llm.ChunkText, llm.ChunkToolDelta:
			assert.Equal(t, 150*ms, d[i], "chunk %d (%d)", i, k[i])
		default:
			assert.Zero(t, d[i], "chunk %d (%d)", i, k[i])
		}
	}

	// Step pacing overrides both.
	d, _ = delays(t, m,
		llm.Message{Role: llm.RoleUser, Content: "slower stream"},
		llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "a", Name: "ls"}}},
		llm.Message{Role: llm.RoleTool, ToolCallID: "a", Content: "x"})
	for i, v := range d {
		assert.Zero(t, v, "chunk %d", i)
	}

	// WithPacing replaces every level.
	d, _ = delays(t, New(s, WithPacing(Pacing{ChunkDelay: 7 * ms})), llm.Message{Role: llm.RoleUser, Content: "slower stream"})
	assert.Zero(t, d[0])
	assert.Equal(t, 7*ms, d[1])
}

func TestMergedFilesKeepTheirPacing(t *testing.T) {
	s, err := Load("testdata/merged")
	require.NoError(t, err)
	m := New(s)
	d, _ := delays(t, m, llm.Message{Role: llm.RoleUser, Content: "hello"})
	assert.Equal(t, 5*time.Millisecond, d[1], "the first file's pacing")
	d, _ = delays(t, m, llm.Message{Role: llm.RoleUser, Content: "bye"})
	assert.Zero(t, d[1], "the second file sets no pacing")
}

func TestErrorStepDelay(t *testing.T) {
	s := Must(Parse("e.yaml", []byte("pacing: {start_delay: 1s, chunk_delay: 2s}\nrules: [{steps: [{error: boom}]}]\n")))
	beats, err := New(s).plan(llm.Request{})
	require.NoError(t, err)
	require.Len(t, beats, 1)
	assert.Equal(t, time.Second, beats[0].delay, "an error with nothing before it waits the start delay")
	assert.EqualError(t, beats[0].err, "boom")
}

func TestSplit(t *testing.T) {
	tests := []struct {
		s    string
		n    int
		want []string
	}{
		{"", 0, nil},
		{"", 3, nil},
		{"one", 0, []string{"one"}},
		{"  lead trail  ", 0, []string{"  lead ", "trail  "}},
		{"a\n\nb c", 0, []string{"a\n\n", "b ", "c"}},
		{"abcdef", 4, []string{"abcd", "ef"}},
		{"äöüß", 3, []string{"äöü", "ß"}},
		{"whole text", -1, []string{"whole text"}},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, split(tt.s, tt.n), "split(%q, %d)", tt.s, tt.n)
	}
}
