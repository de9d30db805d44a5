package agent

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/llm"
)

func evs(ps ...event.Payload) []event.Event {
	out := make([]event.Event, len(ps))
	for i, p := range ps {
		out[i] = event.New("t", "r", p)
	}
	return out
}

func TestTranscript(t *testing.T) {
	args := json.RawMessage(`{"path":"."}`)
	for _, tc := range []struct {
		name string
		in   []event.Event
		want []llm.Message
	}{
		{
			name: "text only",
			in: evs(event.MessageUser{Text: "hi"},
				event.MessageCompleted{Role: event.RoleAssistant, Text: "hello"}),
			want: []llm.Message{{Role: llm.RoleUser, Content: "hi"}, {Role: llm.RoleAssistant, Content: "hello"}},
		},
		{
			name: "text and calls make one turn, results follow",
			in: evs(event.MessageUser{Text: "list"},
				event.MessageCompleted{Role: event.RoleAssistant, Text: "Looking."},
				event.ToolCallCompleted{CallID: "a", Name: "ls", Arguments: args},
				event.ToolCallCompleted{CallID: "b", Name: "read", Arguments: args},
				event.ToolExecCompleted{CallID: "a", Name: "ls", Result: "x"},
				event.ToolExecCompleted{CallID: "b", Name: "read", Result: "nope", IsError: true},
				event.MessageCompleted{Role: event.RoleAssistant, Text: "Done."}),
			want: []llm.Message{
				{Role: llm.RoleUser, Content: "list"},
				{Role: llm.RoleAssistant, Content: "Looking.", ToolCalls: []llm.ToolCall{{ID: "a", Name: "ls", Arguments: `{"path":"."}`}, {ID: "b", Name: "read", Arguments: `{"path":"."}`}}},
				{Role: llm.RoleTool, ToolCallID: "a", Name: "ls", Content: "x"},
				{Role: llm.RoleTool, ToolCallID: "b", Name: "read", Content: "nope", IsError: true},
				{Role: llm.RoleAssistant, Content: "Done."},
			},
		},
		{
			name: "consecutive call turns stay apart",
			in: evs(event.MessageUser{Text: "go"},
				event.ToolCallCompleted{CallID: "a", Name: "ls", Arguments: args},
				event.ToolExecCompleted{CallID: "a", Name: "ls", Result: "1"},
				event.ToolCallCompleted{CallID: "b", Name: "ls", Arguments: args},
				event.ToolExecCompleted{CallID: "b", Name: "ls", Result: "2"}),
			want: []llm.Message{
				{Role: llm.RoleUser, Content: "go"},
				{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "a", Name: "ls", Arguments: `{"path":"."}`}}},
				{Role: llm.RoleTool, ToolCallID: "a", Name: "ls", Content: "1"},
				{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "b", Name: "ls", Arguments: `{"path":"."}`}}},
				{Role: llm.RoleTool, ToolCallID: "b", Name: "ls", Content: "2"},
			},
		},
		{
			name: "unanswered calls of a cancelled run are answered",
			in: evs(event.MessageUser{Text: "go"},
				event.ToolCallCompleted{CallID: "a", Name: "bash", Arguments: args},
				event.RunCancelled{Reason: "cancelled"},
				event.MessageUser{Text: "again"}),
			want: []llm.Message{
				{Role: llm.RoleUser, Content: "go"},
				{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "a", Name: "bash", Arguments: `{"path":"."}`}}},
				{Role: llm.RoleTool, ToolCallID: "a", Name: "bash", Content: cancelledResult, IsError: true},
				{Role: llm.RoleUser, Content: "again"},
			},
		},
		{
			name: "explanations and empty messages are left out",
			in: evs(event.MessageUser{Text: "go"},
				event.MessageCompleted{Role: event.RoleAssistant, Text: ""},
				event.MessageCompleted{Role: event.RoleAssistant, Text: "It lists files.", Purpose: event.PurposeExplanation},
				event.MessageCompleted{Role: event.RoleAssistant, Text: "ok"}),
			want: []llm.Message{{Role: llm.RoleUser, Content: "go"}, {Role: llm.RoleAssistant, Content: "ok"}},
		},
		{
			name: "reasoning and its signature go back with their turn",
			in: evs(event.MessageUser{Text: "go"},
				event.ReasoningCompleted{Text: "think", Signature: "sig1"},
				event.ToolCallCompleted{CallID: "a", Name: "ls", Arguments: args},
				event.ReasoningCompleted{Signature: "late"},
				event.ToolExecCompleted{CallID: "a", Name: "ls", Result: "1"},
				event.ReasoningCompleted{Text: "more"},
				event.MessageCompleted{Role: event.RoleAssistant, Text: "done"}),
			want: []llm.Message{
				{Role: llm.RoleUser, Content: "go"},
				{Role: llm.RoleAssistant, Reasoning: "think", ReasoningSignature: "late", ToolCalls: []llm.ToolCall{{ID: "a", Name: "ls", Arguments: `{"path":"."}`}}},
				{Role: llm.RoleTool, ToolCallID: "a", Name: "ls", Content: "1"},
				{Role: llm.RoleAssistant, Reasoning: "more", Content: "done"},
			},
		},
		{
			name: "a compaction summary replaces what came before",
			in: evs(event.MessageUser{Text: "old"},
				event.MessageCompleted{Role: event.RoleAssistant, Text: "old answer"},
				event.ContextCompacted{Summary: "We talked."},
				event.MessageUser{Text: "new"}),
			want: []llm.Message{
				{Role: llm.RoleUser, Content: "Summary of the conversation so far:\n\nWe talked."},
				{Role: llm.RoleUser, Content: "new"},
			},
		},
		{
			name: "a compaction keeps the messages it says, never a result without its call",
			in: evs(event.MessageUser{Text: "old"},
				event.ToolCallCompleted{CallID: "a", Name: "ls", Arguments: args},
				event.ToolExecCompleted{CallID: "a", Name: "ls", Result: "1"},
				event.MessageCompleted{Role: event.RoleAssistant, Text: "kept answer"},
				event.MessageUser{Text: "kept question"},
				event.ContextCompacted{Summary: "We listed.", KeptMessages: 2},
				event.MessageCompleted{Role: event.RoleAssistant, Text: "new answer"},
				event.MessageUser{Text: "old2"},
				event.ToolCallCompleted{CallID: "b", Name: "ls", Arguments: args},
				event.ToolExecCompleted{CallID: "b", Name: "ls", Result: "2"},
				event.ContextCompacted{Summary: "Twice.", KeptMessages: 1}),
			want: []llm.Message{
				{Role: llm.RoleUser, Content: "Summary of the conversation so far:\n\nTwice."},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Transcript(tc.in))
		})
	}
}

func TestRememberedKeys(t *testing.T) {
	got := rememberedKeys(evs(
		event.ToolApprovalRequested{CallID: "a", Key: "git"},
		event.ToolApprovalResolved{CallID: "a", Decision: event.DecisionApproveAlways},
		event.ToolApprovalRequested{CallID: "b", Key: "rm"},
		event.ToolApprovalResolved{CallID: "b", Decision: event.DecisionApprove},
		event.ToolApprovalRequested{CallID: "c", Key: "apply_patch"},
		event.ToolApprovalResolved{CallID: "c", Decision: event.DecisionApproveAlways},
	))
	assert.Equal(t, map[string]bool{"git": true, "apply_patch": true}, got)
}
