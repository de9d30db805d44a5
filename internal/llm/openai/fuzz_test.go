package openai

import (
	"bytes"
	"testing"
	"unicode/utf8"
)

// FuzzDecodeStream reads arbitrary bytes as a completion stream: whatever
// a server sends, readStream returns (an error or not) without panicking,
// and every chunk it hands on holds valid UTF-8 text, as the events'
// decoding promises.
func FuzzDecodeStream(f *testing.F) {
	f.Add(benchStream(3))
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}}]}\n\n"))
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"reasoning\":{\"x\":1},\"content\":\"\\u00e9\"}}],\"usage\":{\"prompt_tokens\":1.5}}\r\n\r\n"))
	f.Add([]byte("data: {\"error\":{\"message\":\"m\",\"code\":400}}\n\n"))
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]\n\ndata: [DONE]\n\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		_ = readStream(bytes.NewReader(body), func(c *completionChunk) bool {
			for _, ch := range c.Choices {
				d := ch.Delta
				for _, s := range []string{d.Content, d.Refusal, d.Reasoning, d.ReasoningContent, ch.FinishReason} {
					if !utf8.ValidString(s) {
						t.Fatalf("chunk text %q is not UTF-8", s)
					}
				}
			}
			return true
		})
	})
}
