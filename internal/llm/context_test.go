package llm_test

import (
	"strings"
	"testing"

	"github.com/agentwire/agentwire/internal/llm"
)

func TestContextWindow(t *testing.T) {
	for model, want := range map[string]int{
		"gpt-4o-mini":                 128_000,
		"gpt-4o-2024-08-06":           128_000,
		"gpt-4.1-mini":                1_047_576,
		"gpt-4":                       8_192,
		"gpt-4-turbo-preview":         128_000,
		"o1-mini":                     128_000,
		"o1":                          200_000,
		"o3-mini":                     200_000,
		"gpt-5":                       400_000,
		"claude-sonnet-4-5":           200_000,
		"models/gemini-1.5-pro":       2_097_152,
		"gemini-2.5-flash":            1_048_576,
		"llama3.1:8b":                 131_072,
		"llama3":                      8_192,
		"openai/GPT-4o":               128_000,
		"scripted:agentloop":          10_000_000,
		"some-model-nobody-has-heard": llm.DefaultContextWindow,
		"":                            llm.DefaultContextWindow,
	} {
		if got := llm.ContextWindow(model); got != want {
			t.Errorf("ContextWindow(%q) = %d, want %d", model, got, want)
		}
	}
}

func TestTokenizerFor(t *testing.T) {
	// OpenAI's models count with their BPE: "hello world" is two tokens.
	for _, model := range []string{"gpt-4o-mini", "gpt-4", "o3-mini", "gpt-5"} {
		if got := llm.TokenizerFor(model).Count("hello world"); got != 2 {
			t.Errorf("TokenizerFor(%q).Count(%q) = %d, want 2", model, "hello world", got)
		}
	}
	// Others are estimated at four characters a token, rounded up.
	for _, model := range []string{"llama3.1", "claude-sonnet-4-5", "scripted"} {
		if got := llm.TokenizerFor(model).Count("hello world"); got != 3 {
			t.Errorf("TokenizerFor(%q).Count(%q) = %d, want 3", model, "hello world", got)
		}
	}
	// Long input is counted piece by piece, in linear time, and close
	// to the whole.
	tok := llm.TokenizerFor("gpt-4o")
	line := "func main() { fmt.Println(\"hello, world\") }\n"
	one := tok.Count(line)
	if got := tok.Count(strings.Repeat(line, 2000)); got < 1990*one || got > 2010*one {
		t.Errorf("Count of 2000 lines = %d, want about %d", got, 2000*one)
	}
	if got := tok.Count(strings.Repeat(" ", 100_000)); got <= 0 || got > 100_000 {
		t.Errorf("Count of 100,000 spaces = %d", got)
	}
	if got := tok.Count(strings.Repeat("é", 40_000)); got <= 0 {
		t.Errorf("Count of 40,000 é = %d", got)
	}
}
