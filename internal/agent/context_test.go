package agent

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/llm"
)

func TestTranscriptAfterCompactionKeepsRecentMessages(t *testing.T) {
	args := json.RawMessage(`{"path":"."}`)
	got := Transcript(evs(event.MessageUser{Text: "old"},
		event.ToolCallCompleted{CallID: "a", Name: "ls", Arguments: args},
		event.ToolExecCompleted{CallID: "a", Name: "ls", Result: "1"},
		event.MessageCompleted{Role: event.RoleAssistant, Text: "kept answer"},
		event.MessageUser{Text: "kept question"},
		event.ContextCompacted{Summary: "We listed.", KeptMessages: 2},
		event.MessageCompleted{Role: event.RoleAssistant, Text: "new answer"}))
	assert.Equal(t, []llm.Message{
		{Role: llm.RoleUser, Content: "Summary of the conversation so far:\n\nWe listed."},
		{Role: llm.RoleAssistant, Content: "kept answer"},
		{Role: llm.RoleUser, Content: "kept question"},
		{Role: llm.RoleAssistant, Content: "new answer"},
	}, got)
}

func TestMeasureContext(t *testing.T) {
	tok := llm.Estimate{}
	args := json.RawMessage(`{"path":"."}`) // 12 characters: 3 tokens
	for _, tc := range []struct {
		name string
		in   []event.Event
		want ContextUsage
	}{
		{"empty", nil, ContextUsage{}},
		{"estimated without a count", evs(event.MessageUser{Text: "12345678"}),
			ContextUsage{Tokens: 2 + messageOverhead, Messages: 1}},
		{"the last call's prompt, its output and what came after",
			evs(event.MessageUser{Text: "go"},
				event.Usage{PromptTokens: 50, CompletionTokens: 999, Purpose: ""},
				event.MessageUser{Text: "again"},
				event.ReasoningCompleted{Text: "thinking is not sent back"},
				event.MessageCompleted{Role: event.RoleAssistant, Text: "1234"},
				event.ToolCallCompleted{CallID: "a", Name: "ls", Arguments: args},
				event.Usage{PromptTokens: 100, CompletionTokens: 999},
				event.MessageCompleted{Role: event.RoleAssistant, Text: "explained", Purpose: event.PurposeExplanation},
				event.Usage{PromptTokens: 5000, Purpose: event.PurposeExplanation},
				event.ToolExecCompleted{CallID: "a", Name: "ls", Result: "12345678"},
				event.MessageCompleted{Role: event.RoleSystem, Text: "a notice"}),
			ContextUsage{Tokens: 100 + (1 + 4) + (1 + 3 + 4) + (2 + 4), Messages: 4, Calibrated: true}},
		{"a compaction's count",
			evs(event.MessageUser{Text: "go"},
				event.Usage{PromptTokens: 900},
				event.ContextCompacted{NewTokens: 70, Summary: "s"},
				event.Usage{PromptTokens: 9999, Purpose: event.PurposeSummary},
				event.MessageUser{Text: "1234"}),
			ContextUsage{Tokens: 70 + 1 + 4, Messages: 2, Calibrated: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, MeasureContext(tc.in, tok))
		})
	}
}

func TestSplitForSummary(t *testing.T) {
	tok := llm.Estimate{}
	big := strings.Repeat("x", 400) // 100 tokens
	user := func(s string) llm.Message { return llm.Message{Role: llm.RoleUser, Content: s} }
	asst := func(s string) llm.Message { return llm.Message{Role: llm.RoleAssistant, Content: s} }
	call := llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "a", Name: "ls", Arguments: "{}"}}}
	result := func(s string) llm.Message { return llm.Message{Role: llm.RoleTool, ToolCallID: "a", Content: s} }
	for _, tc := range []struct {
		name string
		msgs []llm.Message
		keep int
		want int
	}{
		{"keeps what fits", []llm.Message{user(big), asst(big), user("q"), asst("a")}, 50, 2},
		{"never starts with a result", []llm.Message{user(big), call, result("r"), asst("a")}, 15, 3},
		{"keeps a call with its result", []llm.Message{user(big), call, result("r"), asst("a")}, 20, 1},
		{"summarises all when the end does not fit", []llm.Message{user("q"), call, result(big)}, 50, 3},
		{"all fits: all but the last turn", []llm.Message{user("q"), asst("a"), user("q2"), asst("a2")}, 1000, 2},
		{"all fits, one turn: all", []llm.Message{user("q"), asst("a")}, 1000, 2},
		{"empty", nil, 1000, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, splitForSummary(tc.msgs, tc.keep, tok))
		})
	}
}

func TestRenderTranscriptIsBounded(t *testing.T) {
	msgs := []llm.Message{
		{Role: llm.RoleUser, Content: "the goal"},
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "a", Name: "read", Arguments: `{"path":"x"}`}}},
		{Role: llm.RoleTool, Name: "read", Content: strings.Repeat("é", 10000)},
		{Role: llm.RoleUser, Content: "the latest"},
	}
	s := renderTranscript(msgs, 0)
	assert.Contains(t, s, "### User\nthe goal")
	assert.Contains(t, s, `(calls read {"path":"x"})`)
	assert.Contains(t, s, "output truncated", "a long result is cut")
	short := renderTranscript(msgs, 2000)
	assert.LessOrEqual(t, len(short), 2200)
	assert.Contains(t, short, "the goal")
	assert.Contains(t, short, "the latest")
	assert.True(t, strings.ToValidUTF8(short, "") == short, "cut on rune boundaries")
}
