package llm

import (
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/tiktoken-go/tokenizer/codec"
)

// DefaultContextWindow is the context window assumed for a model the
// table does not know: the size most current models have.
const DefaultContextWindow = 128_000

// contextWindows are the context windows, in tokens, of the model families
// agentwire knows, by model-name prefix; the longest matching prefix wins.
// The figures are the vendors' published ones (input and output together).
var contextWindows = map[string]int{
	// OpenAI
	"gpt-5":         400_000,
	"gpt-4.1":       1_047_576,
	"gpt-4o":        128_000,
	"chatgpt-4o":    128_000,
	"gpt-4-turbo":   128_000,
	"gpt-4-1106":    128_000,
	"gpt-4-0125":    128_000,
	"gpt-4-32k":     32_768,
	"gpt-4":         8_192,
	"gpt-3.5-turbo": 16_385,
	"o1":            200_000,
	"o1-mini":       128_000,
	"o1-preview":    128_000,
	"o3":            200_000,
	"o4-mini":       200_000,
	"codex-mini":    200_000,
	"gpt-oss":       131_072,
	// Anthropic
	"claude-": 200_000,
	// Google
	"gemini-1.5-pro":   2_097_152,
	"gemini-1.5-flash": 1_048_576,
	"gemini-2":         1_048_576,
	"gemini-3":         1_048_576,
	// Open models as Ollama, vLLM and llama.cpp name them
	"llama3.1":  131_072,
	"llama3.2":  131_072,
	"llama3.3":  131_072,
	"llama3":    8_192,
	"qwen2.5":   32_768,
	"qwen3":     40_960,
	"mistral":   32_768,
	"gemma3":    131_072,
	"deepseek-": 131_072,
	// The offline scripted model has no window of its own: a large one,
	// so that scripts compact only when --context-window asks for it.
	"scripted": 10_000_000,
}

// ContextWindow returns the context window of the named model, in tokens,
// from the table of known model families (DefaultContextWindow for others).
// Provider prefixes ("openai/", "models/") and Ollama tags (":8b") are
// ignored; case does not matter.
func ContextWindow(model string) int {
	name := normalizeModel(model)
	best, size := "", DefaultContextWindow
	for prefix, n := range contextWindows {
		if strings.HasPrefix(name, prefix) && len(prefix) > len(best) {
			best, size = prefix, n
		}
	}
	return size
}

func normalizeModel(model string) string {
	name := strings.ToLower(strings.TrimSpace(model))
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	if i := strings.IndexByte(name, ':'); i >= 0 {
		name = name[:i]
	}
	return name
}

// Tokenizer counts tokens of text as a model would.
type Tokenizer interface {
	Count(text string) int
}

// TokenizerFor returns the tokenizer of the named model: OpenAI's BPE
// (o200k_base or cl100k_base, compiled into the binary; nothing is
// downloaded) for OpenAI's models, else an estimate of one token per four
// characters, which is about right for English prose and code.
func TokenizerFor(model string) Tokenizer {
	name := normalizeModel(model)
	switch {
	case strings.HasPrefix(name, "gpt-4o"), strings.HasPrefix(name, "chatgpt-4o"), strings.HasPrefix(name, "gpt-4.1"),
		strings.HasPrefix(name, "gpt-4.5"), strings.HasPrefix(name, "gpt-5"), strings.HasPrefix(name, "gpt-oss"),
		strings.HasPrefix(name, "o1"), strings.HasPrefix(name, "o3"), strings.HasPrefix(name, "o4"),
		strings.HasPrefix(name, "codex-"):
		return bpe{o200k()}
	case strings.HasPrefix(name, "gpt-4"), strings.HasPrefix(name, "gpt-3.5"):
		return bpe{cl100k()}
	}
	return Estimate{}
}

// Estimate is the tokenizer of models whose tokenizer agentwire lacks:
// one token per four characters, rounded up.
type Estimate struct{}

// Count implements Tokenizer.
func (Estimate) Count(text string) int { return (utf8.RuneCountInString(text) + 3) / 4 }

// The BPE vocabularies are large; they are built on first use.
var (
	o200k  = sync.OnceValue(codec.NewO200kBase)
	cl100k = sync.OnceValue(codec.NewCl100kBase)
)

// bpe counts with one of OpenAI's encodings.
type bpe struct{ c *codec.Codec }

// chunk bounds the text the BPE splitter sees at once, at a line break
// where one is near, so that no input costs more than linear time.
const chunk = 16 << 10

// Count implements Tokenizer.
func (t bpe) Count(text string) int {
	n := 0
	for len(text) > 0 {
		piece := text
		if len(piece) > chunk {
			cut := strings.LastIndexByte(piece[:chunk], '\n') + 1
			if cut < chunk/2 {
				cut = chunk
				for cut > 0 && !utf8.RuneStart(piece[cut]) {
					cut--
				}
			}
			piece = piece[:cut]
		}
		k, err := t.c.Count(piece)
		if err != nil {
			k = Estimate{}.Count(piece)
		}
		n += k
		text = text[len(piece):]
	}
	return n
}
