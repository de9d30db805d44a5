package llmtest

import (
	"strings"
)

// Whole answers in each vendor's streaming format, for tests that need a
// real provider on the wire but not the details of its stream (the
// providers' own tests check those).

// OpenAIText is a Chat Completions stream answering text, in pieces, with
// its usage.
func OpenAIText(text string) Reply {
	chunk := func(delta map[string]any, finish any) string {
		return Data(map[string]any{
			"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1, "model": "test",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
		})
	}
	ev := []string{chunk(map[string]any{"role": "assistant", "content": ""}, nil)}
	for _, w := range strings.SplitAfter(text, " ") {
		ev = append(ev, chunk(map[string]any{"content": w}, nil))
	}
	ev = append(ev, chunk(map[string]any{}, "stop"), Data(map[string]any{
		"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1, "model": "test", "choices": []any{},
		"usage": map[string]any{"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
	}), "data: [DONE]\n\n")
	return Reply{Events: ev}
}

// AnthropicText is a Messages stream answering text, in pieces; with
// tool set, the text is instead the input of a call of that tool (the
// answer to a forced tool_choice).
func AnthropicText(text, tool string) Reply {
	ev := func(name string, data map[string]any) string {
		data["type"] = name
		return Event(name, data)
	}
	out := []string{ev("message_start", map[string]any{"message": map[string]any{
		"id": "msg_test", "type": "message", "role": "assistant", "content": []any{}, "model": "claude-test",
		"stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 100, "output_tokens": 1},
	}})}
	block, delta := map[string]any{"type": "text", "text": ""}, func(s string) map[string]any { return map[string]any{"type": "text_delta", "text": s} }
	stop := "end_turn"
	if tool != "" {
		block = map[string]any{"type": "tool_use", "id": "toolu_test", "name": tool, "input": map[string]any{}}
		delta = func(s string) map[string]any { return map[string]any{"type": "input_json_delta", "partial_json": s} }
		stop = "tool_use"
	}
	out = append(out, ev("content_block_start", map[string]any{"index": 0, "content_block": block}))
	for _, w := range strings.SplitAfter(text, " ") {
		out = append(out, ev("content_block_delta", map[string]any{"index": 0, "delta": delta(w)}))
	}
	out = append(out, ev("content_block_stop", map[string]any{"index": 0}),
		ev("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 10}}),
		ev("message_stop", map[string]any{}))
	return Reply{Events: out}
}

// GeminiText is a streamGenerateContent (alt=sse) stream answering text,
// in pieces.
func GeminiText(text string) Reply {
	var out []string
	words := strings.SplitAfter(text, " ")
	for i, w := range words {
		cand := map[string]any{"content": map[string]any{"role": "model", "parts": []any{map[string]any{"text": w}}}, "index": 0}
		r := map[string]any{"candidates": []any{cand}, "modelVersion": "gemini-test", "responseId": "r1"}
		if i == len(words)-1 {
			cand["finishReason"] = "STOP"
			r["usageMetadata"] = map[string]any{"promptTokenCount": 100, "candidatesTokenCount": 10, "totalTokenCount": 110}
		}
		out = append(out, strings.ReplaceAll(Data(r), "\n", "\r\n"))
	}
	return Reply{Events: out}
}
