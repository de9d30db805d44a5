package scripted_test

import (
	"context"
	"encoding/json"
	"io/fs"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/llm"
	"github.com/agentwire/agentwire/internal/llm/scripted"
)

// turn is one streamed model turn, reassembled the way the agent does.
type turn struct {
	chunks    []llm.Chunk
	text      string
	texts     []string // the text fragments, in order
	reasoning string
	signature string
	calls     []call
	usage     *llm.Usage
	finish    llm.FinishReason
	err       error
}

type call struct {
	id, name string
	deltas   []string
	args     string // from ChunkToolDone
}

// play streams req from m and checks the llm.Model contract on the way:
// nothing after an error, exactly one finish and it comes last, tool
// chunks well nested.
func play(t *testing.T, m llm.Model, req llm.Request) turn {
	t.Helper()
	return playCtx(t, context.Background(), m, req)
}

func playCtx(t *testing.T, ctx context.Context, m llm.Model, req llm.Request) turn {
	t.Helper()
	var tr turn
	for c, err := range m.Stream(ctx, req) {
		require.Nil(t, tr.err, "chunk after error %v", tr.err)
		require.Empty(t, tr.finish, "chunk after finish")
		if err != nil {
			tr.err = err
			continue
		}
		tr.chunks = append(tr.chunks, c)
		switch c.Type {
		case llm.ChunkText:
			tr.text += c.Text
			tr.texts = append(tr.texts, c.Text)
		case llm.ChunkReasoning:
			require.Empty(t, tr.text, "reasoning after text")
			tr.reasoning += c.Text
		case llm.ChunkReasoningSignature:
			tr.signature = c.Signature
		case llm.ChunkToolStart:
			require.Equal(t, len(tr.calls), c.Index, "tool start index")
			require.NotEmpty(t, c.CallID)
			tr.calls = append(tr.calls, call{id: c.CallID, name: c.Name})
		case llm.ChunkToolDelta:
			require.Equal(t, len(tr.calls)-1, c.Index, "tool delta index")
			tr.calls[c.Index].deltas = append(tr.calls[c.Index].deltas, c.Arguments)
		case llm.ChunkToolDone:
			require.Equal(t, len(tr.calls)-1, c.Index, "tool done index")
			cl := &tr.calls[c.Index]
			require.Equal(t, cl.id, c.CallID)
			require.Equal(t, cl.name, c.Name)
			cl.args = c.Arguments
		case llm.ChunkUsage:
			require.Nil(t, tr.usage, "second usage chunk")
			u := c.Usage
			tr.usage = &u
		case llm.ChunkFinish:
			require.NotEmpty(t, c.Finish)
			tr.finish = c.Finish
		default:
			t.Fatalf("unknown chunk type %d", c.Type)
		}
	}
	if tr.err == nil {
		require.NotEmpty(t, tr.finish, "stream ended without finish or error")
	}
	return tr
}

// convo builds a request from alternating messages.
func user(s string) llm.Message { return llm.Message{Role: llm.RoleUser, Content: s} }

func assistant(s string, calls ...llm.ToolCall) llm.Message {
	return llm.Message{Role: llm.RoleAssistant, Content: s, ToolCalls: calls}
}

func toolResult(id, name, content string, isErr bool) llm.Message {
	return llm.Message{Role: llm.RoleTool, ToolCallID: id, Name: name, Content: content, IsError: isErr}
}

func req(msgs ...llm.Message) llm.Request { return llm.Request{Messages: msgs} }

// answered returns the assistant message for tr, as the agent would put it
// in the history.
func answered(tr turn) llm.Message {
	m := llm.Message{Role: llm.RoleAssistant, Content: tr.text, Reasoning: tr.reasoning}
	for _, c := range tr.calls {
		m.ToolCalls = append(m.ToolCalls, llm.ToolCall{ID: c.id, Name: c.name, Arguments: c.args})
	}
	return m
}

func load(t *testing.T, path string) *scripted.Model {
	t.Helper()
	s, err := scripted.Load(path)
	require.NoError(t, err)
	return scripted.New(s, scripted.WithPacing(scripted.Pacing{}))
}

func parse(t *testing.T, yaml string) *scripted.Model {
	t.Helper()
	s, err := scripted.Parse("inline.yaml", []byte(yaml))
	require.NoError(t, err)
	return scripted.New(s)
}

func TestMatchPrecedence(t *testing.T) {
	m := parse(t, `
name: precedence
rules:
  - steps: [{text: fallback}]
  - match: {contains: weather}
    steps: [{text: weather}]
  - match: {contains: [forecast, "rain?"]}
    steps: [{text: forecast}]
  - match: {contains: weather}
    steps: [{text: shadowed}]
  - match: {regex: '^\d+$'}
    steps: [{text: digits}]
  - match: {exact: "hi"}
    steps: [{text: exact}]
  - match: {contains: plan, system: "you are a planner"}
    steps: [{text: planner}]
  - match: {contains: plan}
    steps: [{text: plan}]
`)
	tests := []struct {
		system, msg, want string
	}{
		{"", "What's the WEATHER like?", "weather"},
		{"", "weather forecast", "weather"}, // first match wins
		{"", "any forecast?", "forecast"},
		{"", "will it rain?", "forecast"},
		{"", "12345", "digits"},
		{"", "12345 apples", "fallback"},
		{"", "  hi \n", "exact"},
		{"", "hi there", "fallback"},
		{"", "Hi", "fallback"}, // exact is case-sensitive
		{"You are a PLANNER.", "make a plan", "planner"},
		{"You are a helper.", "make a plan", "plan"},
		{"", "", "fallback"},
	}
	for _, tt := range tests {
		r := llm.Request{System: tt.system, Messages: []llm.Message{user(tt.msg)}}
		got := play(t, m, r)
		assert.Equal(t, tt.want, got.text, "Stream(system %q, %q)", tt.system, tt.msg)
	}

	// Only the last user message counts.
	got := play(t, m, req(user("weather"), assistant("weather"), user("12")))
	assert.Equal(t, "digits", got.text)
}

func TestNoFallback(t *testing.T) {
	m := parse(t, `
rules:
  - match: {contains: weather}
    steps: [{text: weather}]
`)
	got := play(t, m, req(user("hello")))
	assert.Equal(t, "The scripted model has no rule for this message.", got.text)
	assert.Equal(t, llm.FinishStop, got.finish)
}

func TestContinuationAfterToolResults(t *testing.T) {
	m := load(t, "testdata/tools.yaml")
	conv := []llm.Message{user("list files"), assistant("No rule matched."), user("please run tools")}

	t1 := play(t, m, req(conv...))
	require.NoError(t, t1.err)
	assert.Equal(t, "I'll list the folder and read notes.txt.", t1.text)
	require.Len(t, t1.calls, 2)
	assert.Equal(t, "ls", t1.calls[0].name)
	assert.JSONEq(t, `{"path":"."}`, t1.calls[0].args)
	assert.Equal(t, "read", t1.calls[1].name)
	assert.JSONEq(t, `{"path":"notes.txt"}`, t1.calls[1].args)
	assert.NotEqual(t, t1.calls[0].id, t1.calls[1].id)
	assert.Equal(t, llm.FinishToolCalls, t1.finish)

	conv = append(conv, answered(t1),
		toolResult(t1.calls[0].id, "ls", "notes.txt\nsrc/\n", false),
		toolResult(t1.calls[1].id, "", "buy milk", false)) // name resolved from the call id
	t2 := play(t, m, req(conv...))
	require.NoError(t, t2.err)
	assert.Equal(t, "ls returned 2 entries.\nnotes.txt says: buy milk", t2.text)
	assert.Empty(t, t2.calls)
	assert.Equal(t, llm.FinishStop, t2.finish)

	// Called again after the script ran out, the rule repeats its last text.
	conv = append(conv, answered(t2))
	t3 := play(t, m, req(conv...))
	assert.Equal(t, t2.text, t3.text)
	assert.Equal(t, llm.FinishStop, t3.finish)
}

func TestThreeStepChain(t *testing.T) {
	m := load(t, "testdata/tools.yaml")
	conv := []llm.Message{user("chain please")}
	t1 := play(t, m, req(conv...))
	require.Len(t, t1.calls, 1)
	assert.Empty(t, t1.text)
	conv = append(conv, answered(t1), toolResult(t1.calls[0].id, "ls", "a.md\nb.md", false))

	t2 := play(t, m, req(conv...))
	require.Len(t, t2.calls, 1)
	assert.Equal(t, "read", t2.calls[0].name)
	assert.JSONEq(t, `{"path":"a.md"}`, t2.calls[0].args)
	assert.NotEqual(t, t1.calls[0].id, t2.calls[0].id)
	conv = append(conv, answered(t2), toolResult(t2.calls[0].id, "read", "# A", false))

	t3 := play(t, m, req(conv...))
	assert.Equal(t, "The first entry says: # A", t3.text)
	assert.Equal(t, llm.FinishStop, t3.finish)
}

func TestChunking(t *testing.T) {
	m := load(t, "testdata/text.yaml")

	got := play(t, m, req(user("chunked please")))
	want := "Four characters per chunk, ünïcödé included."
	assert.Equal(t, want, got.text)
	require.Greater(t, len(got.texts), 1)
	for i, f := range got.texts {
		n := utf8.RuneCountInString(f)
		if i < len(got.texts)-1 {
			assert.Equal(t, 4, n, "fragment %d %q", i, f)
		} else {
			assert.LessOrEqual(t, n, 4, "last fragment %q", f)
		}
		assert.True(t, utf8.ValidString(f), "fragment %q splits a character", f)
	}

	got = play(t, m, req(user("hello")))
	assert.Equal(t, "Hello! This reply streams word by word.", got.text)
	assert.Equal(t, []string{"Hello! ", "This ", "reply ", "streams ", "word ", "by ", "word."}, got.texts)

	got = play(t, m, req(user("the whole thing")))
	assert.Equal(t, []string{"This reply arrives as one single chunk."}, got.texts)
}

func TestArgumentsStreamAsDeltas(t *testing.T) {
	m := parse(t, `
rules:
  - steps:
      - tool_calls:
          - name: write_file
            arguments:
              path: "dir/ß.txt"
              content: "line one\nline \"two\" & <three>\n"
              mode: 420
              append: false
              tags: [a, b]
              meta: {z: 1, a: null}
          - {name: raw, arguments: '{"a": 1', chunk: 3}
          - {name: whole, arguments: {x: 1}, chunk: -1}
          - {name: none}
`)
	got := play(t, m, req(user("go")))
	require.Len(t, got.calls, 4)

	c := got.calls[0]
	assert.Greater(t, len(c.deltas), 2, "arguments should stream as several deltas")
	assert.Equal(t, c.args, strings.Join(c.deltas, ""))
	assert.Equal(t, `{"path":"dir/ß.txt","content":"line one\nline \"two\" & <three>\n","mode":420,"append":false,"tags":["a","b"],"meta":{"z":1,"a":null}}`, c.args,
		"keys keep the order written; <, > and & are not escaped")
	for _, d := range c.deltas {
		assert.True(t, utf8.ValidString(d), "delta %q splits a character", d)
	}

	c = got.calls[1]
	assert.Equal(t, `{"a": 1`, c.args, "string arguments are sent verbatim")
	assert.Equal(t, []string{`{"a`, `": `, `1`}, c.deltas)

	assert.Equal(t, []string{`{"x":1}`}, got.calls[2].deltas)
	assert.Equal(t, "{}", got.calls[3].args)
}

func TestTemplates(t *testing.T) {
	m := parse(t, `
rules:
  - match: {contains: quote}
    steps:
      - text: 'You said "{{user_message}}".'
        reasoning: "Thinking about {{truncate 5 user_message}}"
        tool_calls:
          - {name: grep, arguments: {pattern: "{{user_message}}", n: 2}}
      - text: >-
          last={{last_tool_result}} err={{last_tool_error}}
          grep={{tool_result "grep"}} grepErr={{tool_error "grep"}}
          missing=[{{tool_result "nope"}}] lines={{len (lines "a\n\n b \n")}}
`)
	msg := `quote "this" \ and {{that}}`
	t1 := play(t, m, req(user(msg)))
	require.NoError(t, t1.err)
	assert.Equal(t, `You said "`+msg+`".`, t1.text)
	assert.Equal(t, "Thinking about quote…", t1.reasoning)
	require.Len(t, t1.calls, 1)
	var args struct {
		Pattern string `json:"pattern"`
		N       int    `json:"n"`
	}
	require.NoError(t, json.Unmarshal([]byte(t1.calls[0].args), &args), "arguments %s", t1.calls[0].args)
	assert.Equal(t, msg, args.Pattern)
	assert.Equal(t, 2, args.N)

	t2 := play(t, m, req(user(msg), answered(t1), toolResult(t1.calls[0].id, "grep", "no matches", true)))
	assert.Equal(t, "last=no matches err=true grep=no matches grepErr=true missing=[] lines=2", t2.text)
}

func TestTemplateExecutionError(t *testing.T) {
	m := parse(t, `
rules:
  - steps:
      - text: '{{index (lines user_message) 3}}'
`)
	got := play(t, m, req(user("one line")))
	require.Error(t, got.err)
	assert.Contains(t, got.err.Error(), "index out of range")
	assert.Empty(t, got.chunks)
}

func TestErrorStep(t *testing.T) {
	m := load(t, "testdata/error.yaml")

	got := play(t, m, req(user("fail midway")))
	assert.Equal(t, "This reply starts normally and then", got.text)
	var se *scripted.Error
	require.ErrorAs(t, got.err, &se)
	assert.Equal(t, "upstream exploded mid-stream", se.Message)
	assert.Equal(t, "upstream exploded mid-stream", got.err.Error())
	assert.Nil(t, got.usage)

	got = play(t, m, req(user("fail now")))
	assert.Empty(t, got.chunks)
	assert.EqualError(t, got.err, "upstream unavailable")

	t1 := play(t, m, req(user("fail after tool")))
	require.NoError(t, t1.err)
	require.Len(t, t1.calls, 1)
	t2 := play(t, m, req(user("fail after tool"), answered(t1), toolResult(t1.calls[0].id, "ls", "0123456789012345678901234", false)))
	assert.EqualError(t, t2.err, "the model failed after seeing: 01234567890123456789…")
}

func TestFinishAndUsage(t *testing.T) {
	fin := load(t, "testdata/finish.yaml")
	assert.Equal(t, llm.FinishLength, play(t, fin, req(user("cut off"))).finish)
	assert.Equal(t, llm.FinishFiltered, play(t, fin, req(user("filtered"))).finish)

	text := load(t, "testdata/text.yaml")
	got := play(t, text, req(user("usage please")))
	require.NotNil(t, got.usage)
	assert.Equal(t, llm.Usage{PromptTokens: 1200, CompletionTokens: 34}, *got.usage)

	// Estimated: about four characters per token, rounded up.
	got = play(t, text, llm.Request{System: "12345678", Messages: []llm.Message{user("hello")}})
	require.NotNil(t, got.usage)
	assert.Equal(t, int64(4), got.usage.PromptTokens, "13 characters of prompt")
	assert.Equal(t, int64((utf8.RuneCountInString(got.text)+3)/4), got.usage.CompletionTokens)
}

func TestReasoning(t *testing.T) {
	m := load(t, "testdata/reasoning.yaml")
	got := play(t, m, req(user("signed reasoning please")))
	assert.Equal(t, "This reasoning block carries a signature.", got.reasoning)
	assert.Equal(t, "c2NyaXB0ZWQtc2lnbmF0dXJl", got.signature)
	assert.Equal(t, "The signature closed the reasoning block.", got.text)

	var kinds []llm.ChunkType
	for _, c := range got.chunks {
		if len(kinds) == 0 || kinds[len(kinds)-1] != c.Type {
			kinds = append(kinds, c.Type)
		}
	}
	assert.Equal(t, []llm.ChunkType{llm.ChunkReasoning, llm.ChunkReasoningSignature, llm.ChunkText, llm.ChunkUsage, llm.ChunkFinish}, kinds)
}

func TestCancelDuringDelay(t *testing.T) {
	s, err := scripted.Parse("slow.yaml", []byte(`
pacing: {chunk_delay: 1h}
rules:
  - steps: [{text: "one two three"}]
`))
	require.NoError(t, err)
	m := scripted.New(s)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got []llm.Chunk
	var streamErr error
	for c, err := range m.Stream(ctx, req(user("go"))) {
		if err != nil {
			streamErr = err
			break
		}
		got = append(got, c)
		cancel() // the next chunk waits an hour unless cancellation stops it
	}
	require.Len(t, got, 1)
	assert.Equal(t, "one ", got[0].Text)
	assert.ErrorIs(t, streamErr, context.Canceled)

	// A context cancelled before the call yields nothing but its error.
	got2 := playCtx(t, ctx, m, req(user("go")))
	assert.Empty(t, got2.chunks)
	assert.ErrorIs(t, got2.err, context.Canceled)
}

func TestCancelDuringStartDelay(t *testing.T) {
	s, err := scripted.Parse("slow.yaml", []byte(`
pacing: {start_delay: 1h}
rules:
  - steps: [{text: "hello"}]
`))
	require.NoError(t, err)
	m := scripted.New(s)
	ctx, cancel := context.WithCancel(context.Background())
	type item struct {
		c   llm.Chunk
		err error
	}
	done := make(chan []item)
	go func() {
		var items []item
		for c, err := range m.Stream(ctx, req(user("go"))) {
			items = append(items, item{c, err})
		}
		done <- items
	}()
	cancel()
	got := <-done
	require.Len(t, got, 1)
	assert.ErrorIs(t, got[0].err, context.Canceled)
}

func TestConsumerStopsEarly(t *testing.T) {
	m := load(t, "testdata/tools.yaml")
	n := 0
	for range m.Stream(context.Background(), req(user("run tools"))) {
		n++
		if n == 2 {
			break
		}
	}
	assert.Equal(t, 2, n)
}

func TestStateless(t *testing.T) {
	s, err := scripted.Load("testdata/tools.yaml")
	require.NoError(t, err)
	a, b := scripted.New(s), scripted.New(s)
	r := req(user("run tools"))

	first := play(t, a, r)
	assert.Equal(t, first.chunks, play(t, a, r).chunks, "same model, same request")
	assert.Equal(t, first.chunks, play(t, b, r).chunks, "another model, same request")

	// The same rule later in the thread gets new call ids.
	later := play(t, a, req(user("run tools"), answered(first),
		toolResult(first.calls[0].id, "ls", "", false), toolResult(first.calls[1].id, "read", "", false),
		assistant("done"), user("run tools")))
	require.Len(t, later.calls, 2)
	assert.NotEqual(t, first.calls[0].id, later.calls[0].id)

	// Fixed ids are kept as written.
	fixed := play(t, a, req(user("fixed ids")))
	require.Len(t, fixed.calls, 2)
	assert.Equal(t, "call_fixed_1", fixed.calls[0].id)
	assert.Equal(t, "call_fixed_2", fixed.calls[1].id)
}

func TestConcurrentStreams(t *testing.T) {
	m := load(t, "testdata/tools.yaml")
	r := req(user("grep needle"))
	want := play(t, m, r).chunks
	var wg sync.WaitGroup
	results := make([][]llm.Chunk, 8)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c, err := range m.Stream(context.Background(), r) {
				if err != nil {
					return
				}
				results[i] = append(results[i], c)
			}
		}()
	}
	wg.Wait()
	for i, got := range results {
		assert.Equal(t, want, got, "stream %d", i)
	}
}

func TestName(t *testing.T) {
	assert.Equal(t, "scripted:default", scripted.New(nil).Name())
	assert.Equal(t, "scripted", parse(t, "rules: [{steps: [{text: x}]}]").Name())
	assert.Equal(t, "scripted:merged", load(t, "testdata/merged").Name())
}

func TestLoadDirectory(t *testing.T) {
	s, err := scripted.Load("testdata/merged")
	require.NoError(t, err)
	assert.Equal(t, "merged", s.Name())
	m := scripted.New(s)
	assert.Equal(t, "hello from the first file", play(t, m, req(user("hello"))).text)
	assert.Equal(t, "bye from the second file", play(t, m, req(user("bye"))).text)
	assert.Equal(t, "fallback from the second file", play(t, m, req(user("what?"))).text)

	// The whole testdata folder is one usable scenario too.
	all := load(t, "testdata")
	assert.Equal(t, "The form returned {\"email\":\"a@b.c\"}", func() string {
		t1 := play(t, all, req(user("show form")))
		require.Len(t, t1.calls, 1)
		return play(t, all, req(user("show form"), answered(t1), toolResult(t1.calls[0].id, "ui", `{"email":"a@b.c"}`, false))).text
	}())
	assert.Equal(t, "No rule of the test scenarios matches your message.", play(t, all, req(user("zzz"))).text)
}

func TestLoadErrors(t *testing.T) {
	_, err := scripted.Load("testdata/does-not-exist.yaml")
	require.Error(t, err)
	assert.ErrorIs(t, err, fs.ErrNotExist)

	empty := t.TempDir()
	_, err = scripted.Load(empty)
	assert.ErrorContains(t, err, "no *.yaml or *.yml scenario files")
}

func TestLogsTheRulePlayed(t *testing.T) {
	var buf strings.Builder
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	m := scripted.New(scripted.Default(), scripted.WithLogger(log), scripted.WithPacing(scripted.Pacing{}))
	play(t, m, req(user("demo input")))
	assert.Contains(t, buf.String(), `rule="demo input"`)
	assert.Contains(t, buf.String(), "at=default.yaml:")
	assert.Contains(t, buf.String(), "step=1")
}
