package server

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/config"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/llm/llmtest"
	"github.com/agentwire/agentwire/internal/protocol"
	"github.com/agentwire/agentwire/internal/runs"
	"github.com/agentwire/agentwire/internal/server/providers"
)

// completionChunk is one Chat Completions stream chunk.
func completionChunk(delta map[string]any, finish any) string {
	return llmtest.Data(map[string]any{
		"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o-mini",
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
	})
}

func completionUsage(prompt, completion int) string {
	return llmtest.Data(map[string]any{
		"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o-mini", "choices": []any{},
		"usage": map[string]any{"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
	})
}

// say is an upstream reply streaming text in words.
func say(text string) llmtest.Reply {
	ev := []string{completionChunk(map[string]any{"role": "assistant", "content": ""}, nil)}
	for _, w := range strings.SplitAfter(text, " ") {
		ev = append(ev, completionChunk(map[string]any{"content": w}, nil))
	}
	return llmtest.Reply{Events: append(ev, completionChunk(map[string]any{}, "stop"), completionUsage(100, 10), "data: [DONE]\n\n")}
}

// calls is an upstream reply making one tool call.
func calls(id, name string, args map[string]any) llmtest.Reply {
	b, _ := json.Marshal(args)
	ev := []string{
		completionChunk(map[string]any{"role": "assistant", "content": nil}, nil),
		completionChunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": id, "type": "function",
			"function": map[string]any{"name": name, "arguments": string(b)}}}}, nil),
	}
	return llmtest.Reply{Events: append(ev, completionChunk(map[string]any{}, "tool_calls"), completionUsage(120, 15), "data: [DONE]\n\n")}
}

// Every strategy runs end to end on a server whose model is an
// OpenAI-compatible upstream, chosen per run through the Core (no
// protocol on this branch selects one yet), with the working folder's
// SOUL.md and AGENTS.md as the system message of every call.
func TestStrategiesAgainstOpenAI(t *testing.T) {
	for _, tc := range []struct {
		strategy string
		replies  []llmtest.Reply
		reply    string
		outline  []string
	}{
		{
			strategy: "dup",
			replies: []llmtest.Reply{
				say(`{"core_goal": "Say what notes.txt holds", "key_constraints": ["read only"], "relevant_context": "notes.txt"}`),
				say("1. Read notes.txt. 2. Report."),
				calls("call_d1", "read", map[string]any{"path": "notes.txt"}),
				say("The notes say: remember the milk."),
			},
			reply: "The notes say: remember the milk.",
			outline: []string{"node.entered understand", "node.entered plan", "node.entered think", "node.entered act",
				"node.entered observe", "node.entered think"},
		},
		{
			strategy: "tot",
			replies: []llmtest.Reply{
				say(`{"candidates": ["Read missing.txt", "Read notes.txt"]}`),
				say(`{"scores": [0.9, 0.5]}`),
				calls("call_t1", "read", map[string]any{"path": "missing.txt"}),
				calls("call_t2", "read", map[string]any{"path": "notes.txt"}),
				say(`{"candidates": ["Answer from the notes"]}`),
				say(`{"scores": [1]}`),
				say("Remember the milk."),
			},
			reply: "Remember the milk.",
			outline: []string{"node.entered expand", "tot.expanded", "node.entered evaluate", "tot.evaluated",
				"node.entered think", "node.entered act", "tot.backtracked", "node.entered think", "node.entered act",
				"node.entered expand", "tot.expanded", "node.entered evaluate", "tot.evaluated", "node.entered think"},
		},
		{
			strategy: "got",
			replies: []llmtest.Reply{
				say(`{"nodes": [{"id": "a", "task": "Read notes.txt", "deps": []}, {"id": "b", "task": "Report", "deps": ["a"]}]}`),
				calls("call_g1", "read", map[string]any{"path": "notes.txt"}),
				say("milk"),
				say("The report: milk."),
				say("You should remember the milk."),
			},
			reply: "You should remember the milk.",
			outline: []string{"node.entered plan", "got.planned", "got.node.started", "node.entered think", "node.entered act",
				"node.entered think", "got.node.completed", "got.node.started", "node.entered think", "got.node.completed",
				"node.entered synthesize"},
		},
		{
			strategy: "got_adaptive",
			replies: []llmtest.Reply{
				say(`{"nodes": [{"id": "a", "task": "Gather", "deps": []}, {"id": "b", "task": "Report", "deps": ["a"]}]}`),
				say(`{"expand": true, "nodes": [{"id": "x", "task": "Look", "deps": []}, {"id": "y", "task": "Note", "deps": ["x"]}]}`),
				say("looked"),
				say("noted"),
				say(`{"expand": false}`),
				say("reported"),
				say("All gathered and reported."),
			},
			reply: "All gathered and reported.",
			outline: []string{"node.entered plan", "got.planned", "got.node.started", "node.entered assess", "got.expanded",
				"got.node.started", "node.entered think", "got.node.completed", "got.node.started", "node.entered think",
				"got.node.completed", "got.node.completed", "got.node.started", "node.entered assess", "node.entered think",
				"got.node.completed", "node.entered synthesize"},
		},
	} {
		t.Run(tc.strategy, func(t *testing.T) {
			upstream := llmtest.NewServer(t, tc.replies...)
			work := t.TempDir()
			writeFile(t, work, "SOUL.md", "You are the strategy tester.")
			writeFile(t, work, "AGENTS.md", "Answer in one line.")
			writeFile(t, work, "notes.txt", "remember the milk")
			env := map[string]string{"OPENAI_BASE_URL": upstream.URL + "/v1"}
			cfg, err := config.Parse([]string{"--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--workdir", work,
				"--model", "gpt-4o-mini"}, func(k string) string { return env[k] }, io.Discard)
			require.NoError(t, err)
			ts := startServer(t, cfg, Options{Models: providers.Models()})

			ctx, cancel := context.WithTimeout(t.Context(), frameTimeout)
			defer cancel()
			thread := uuid.NewString()
			feed, err := protocol.Subscribe(ctx, ts.core, thread, 0)
			require.NoError(t, err)
			defer feed.Close()
			_, err = ts.core.Post(ctx, thread, runs.Input{Text: "what do my notes say?", Options: event.RunOptions{Strategy: tc.strategy}})
			require.NoError(t, err)

			var evs []event.Event
			for done := false; !done; {
				e, ok := <-feed.Events()
				require.True(t, ok, "feed ended: %v", feed.Err())
				evs = append(evs, e)
				switch e.Type() {
				case event.TypeRunCompleted, event.TypeRunFailed, event.TypeRunCancelled:
					done = true
				}
			}
			end := evs[len(evs)-1]
			require.Equal(t, event.TypeRunCompleted, end.Type(), "%+v", end.Payload)
			assert.Equal(t, tc.reply, end.Payload.(event.RunCompleted).Reply)

			var outline []string
			usages := 0
			for _, e := range evs {
				switch p := e.Payload.(type) {
				case event.NodeEntered:
					outline = append(outline, "node.entered "+p.Node)
				case event.Usage:
					usages++
				case event.RunStarted:
					assert.Equal(t, tc.strategy, p.Strategy)
				default:
					if s := string(e.Type()); strings.HasPrefix(s, "tot.") || strings.HasPrefix(s, "got.") {
						outline = append(outline, s)
					}
				}
			}
			assert.Equal(t, tc.outline, outline)

			reqs := upstream.Requests()
			require.Len(t, reqs, len(tc.replies))
			assert.Equal(t, len(reqs), usages, "one usage event per model call")
			for i, r := range reqs {
				msgs := r.JSON(t)["messages"].([]any)
				first := msgs[0].(map[string]any)
				assert.Equal(t, "system", first["role"], "request %d", i)
				assert.True(t, strings.HasPrefix(first["content"].(string), "You are the strategy tester.\n\nAnswer in one line."),
					"request %d: the role prompt opens every call's system message: %q", i, first["content"])
			}
		})
	}
}
