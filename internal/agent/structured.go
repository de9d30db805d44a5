package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/llm"
)

// The steps of the strategies other than react ask the model for
// structure (an understanding, candidates, scores, a plan of sub-tasks,
// an assessment, the next speaker). Any model must do: the structure is
// asked for the strongest way the provider offers (llm.Request.Structured),
// the answer is read leniently (decodeJSON), an unusable answer is shown
// to the model once with the reason, and when the second answer cannot be
// used either the step falls back to an outcome of its own, which a
// system message tells people about. Only a failing provider (an error,
// not an answer) fails the run.

// badOutput is a model answer a strategy could not use: not the JSON it
// asked for, or JSON that breaks its rules (a cyclic plan, a score out of
// range).
type badOutput struct{ err error }

func (b *badOutput) Error() string { return b.err.Error() }
func (b *badOutput) Unwrap() error { return b.err }

// invalid returns a badOutput error.
func invalid(format string, args ...any) error { return &badOutput{fmt.Errorf(format, args...)} }

// step is a strategy's side call for something it needs from the model.
type step struct {
	// node names the step's node spans ("understand", "expand", ...).
	node string
	// instruction follows the run's system prompt.
	instruction string
	// schema is the structure asked for; nil for a prose answer.
	schema *llm.Schema
	// parse takes the answer's text and keeps what it needs; an error
	// says why the answer cannot be used.
	parse func(text string) error
	// fallback sets the step's outcome when no answer could be used,
	// from the text of the model's first answer ("" when it gave none),
	// and says what it did, for people ("its own words stand for the
	// understanding").
	fallback func(text string) string
}

// decide makes step s's side call: the model gets the run's system prompt
// followed by the step's instruction, and msgs; its answer (a message with
// purpose "strategy") goes to s.parse. An answer parse rejects is shown to
// the model with the reason, once; when the second cannot be used either,
// s.fallback decides and a system message says so. Each attempt is a node
// span of its own, whose exit carries the reason. The error returned, for
// a provider's failure, is a *failure with code model_error.
func (r *run) decide(ctx context.Context, msgs []llm.Message, s step) error {
	req := llm.Request{System: r.withInstruction(s.instruction), Messages: msgs, Structured: s.schema}
	first := ""
	for attempt := 1; ; attempt++ {
		r.emit(event.NodeEntered{Node: s.node})
		turn, err := r.stream(ctx, req, event.PurposeStrategy)
		if err == nil {
			err = s.parse(turn.Content)
			if err != nil && !errors.As(err, new(*badOutput)) {
				err = &badOutput{err}
			}
		}
		exit := event.NodeExited{Node: s.node}
		if err != nil {
			exit.Error = err.Error()
		}
		r.emit(exit)
		var bad *badOutput
		switch {
		case err == nil:
			return nil
		case !errors.As(err, &bad):
			return &failure{event.CodeModelError, fmt.Errorf("model error: %w", err)}
		}
		if first == "" {
			first = strings.TrimSpace(turn.Content)
		}
		if attempt == 2 {
			what := s.fallback(first)
			r.note(fmt.Sprintf("The model's answer to the %s step could not be used, even after a retry (%v), so %s.", s.node, err, what))
			return nil
		}
		r.log.Info("retrying a strategy step after an unusable answer", "node", s.node, "err", err)
		again := "Answer again, following the instructions exactly."
		if s.schema != nil {
			again = "Answer again, following the instructions exactly: reply with only the JSON object they describe."
		}
		req.Messages = append(slices.Clone(req.Messages),
			llm.Message{Role: llm.RoleAssistant, Content: turn.Content},
			llm.Message{Role: llm.RoleUser, Content: retryPrefix + err.Error() + "\n\n" + again})
	}
}

// retryPrefix opens the message that shows the model why its answer to a
// strategy step could not be used.
const retryPrefix = "Your answer could not be used: "

// note tells people, in a system message (shown by every protocol, never
// part of the model's history), that a step went on without the model's
// answer.
func (r *run) note(text string) {
	r.log.Info("a strategy step fell back", "note", text)
	r.systemMessage(text)
}

// lastUserText is the text of the transcript's last user message.
func (r *run) lastUserText() string {
	for i := len(r.msgs) - 1; i >= 0; i-- {
		if m := r.msgs[i]; m.Role == llm.RoleUser && !isSummary(m) {
			return strings.TrimSpace(m.Content)
		}
	}
	return ""
}

// schema returns an llm.Schema of the JSON text js (built by the
// strategies from constants: it is valid).
func schema(name, js string) *llm.Schema {
	return &llm.Schema{Name: name, JSON: json.RawMessage(js)}
}

// decodeJSON decodes the JSON object in a model's answer into v. Models
// answer in many ways besides the bare object: in a ```json fence, with
// prose around it, with trailing commas, single quotes, unquoted keys or
// Python's True/False/None, with raw line breaks in strings. The first
// object found that is JSON, as it is or once those are mended, is
// decoded.
func decodeJSON(text string, v any) error {
	obj, err := findObject(text)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(obj, v); err != nil {
		return invalid("the answer is not the JSON object asked for: %v", err)
	}
	return nil
}

// fence matches a Markdown code block, with or without a language.
var fence = regexp.MustCompile("(?s)```[A-Za-z0-9_-]*[ \t]*\r?\n?(.*?)```")

// maxCandidates bounds the objects findObject tries in one answer.
const maxCandidates = 32

// findObject returns the first JSON object in text (see decodeJSON).
func findObject(text string) ([]byte, error) {
	var cands []string
	for _, m := range fence.FindAllStringSubmatch(text, maxCandidates) {
		if body := strings.TrimSpace(m[1]); strings.HasPrefix(body, "{") {
			cands = append(cands, body)
		}
	}
	for i := 0; i < len(text) && len(cands) < 2*maxCandidates; i++ {
		if text[i] != '{' {
			continue
		}
		if end := closing(text, i); end > 0 {
			cands = append(cands, text[i:end])
		}
	}
	if len(cands) == 0 {
		if strings.IndexByte(text, '{') >= 0 {
			return nil, invalid("the answer's JSON object is not complete")
		}
		return nil, invalid("the answer holds no JSON object")
	}
	var firstErr error
	for _, c := range cands[:min(len(cands), 2*maxCandidates)] {
		if b := []byte(c); json.Valid(b) {
			return b, nil
		}
		mended := []byte(mend(c))
		if json.Valid(mended) {
			return mended, nil
		}
		if firstErr == nil {
			var v any
			firstErr = json.Unmarshal([]byte(c), &v)
		}
	}
	return nil, invalid("the answer holds no valid JSON object: %v", firstErr)
}

// closing returns the end (exclusive) of the object that opens at s[i],
// skipping strings in double or single quotes; -1 when it never closes.
func closing(s string, i int) int {
	depth := 0
	var quote byte
	for j := i; j < len(s); j++ {
		c := s[j]
		if quote != 0 {
			switch c {
			case '\\':
				j++
			case quote:
				quote = 0
			}
			continue
		}
		switch c {
		case '"', '\'':
			quote = c
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth == 0 {
				return j + 1
			}
		}
	}
	return -1
}

// mend rewrites what models get wrong in JSON: single-quoted strings,
// unquoted keys, True/False/None, trailing commas and raw control
// characters in strings. It leaves the rest alone.
func mend(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\'':
			i = mendString(&b, s, i)
		case c == ',':
			j := i + 1
			for j < len(s) && strings.IndexByte(" \t\r\n", s[j]) >= 0 {
				j++
			}
			if j < len(s) && (s[j] == '}' || s[j] == ']') {
				continue // a trailing comma
			}
			b.WriteByte(c)
		case c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
			j := i
			for j < len(s) && (s[j] == '_' || 'a' <= s[j] && s[j] <= 'z' || 'A' <= s[j] && s[j] <= 'Z' || '0' <= s[j] && s[j] <= '9') {
				j++
			}
			word := s[i:j]
			k := j
			for k < len(s) && strings.IndexByte(" \t\r\n", s[k]) >= 0 {
				k++
			}
			switch {
			case k < len(s) && s[k] == ':':
				b.WriteString(`"` + word + `"`)
			case word == "True":
				b.WriteString("true")
			case word == "False":
				b.WriteString("false")
			case word == "None":
				b.WriteString("null")
			default:
				b.WriteString(word)
			}
			i = j - 1
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// mendString writes the string that opens at s[i] (in double or single
// quotes) as a JSON string and returns the index of its closing quote.
func mendString(b *strings.Builder, s string, i int) int {
	quote := s[i]
	b.WriteByte('"')
	for j := i + 1; j < len(s); j++ {
		c := s[j]
		switch {
		case c == '\\' && j+1 < len(s):
			if quote == '\'' && s[j+1] == '\'' {
				b.WriteByte('\'')
			} else {
				b.WriteByte(c)
				b.WriteByte(s[j+1])
			}
			j++
		case c == quote:
			b.WriteByte('"')
			return j
		case c == '"': // inside single quotes
			b.WriteString(`\"`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\t':
			b.WriteString(`\t`)
		case c < 0x20:
			fmt.Fprintf(b, `\u%04x`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return len(s) - 1
}
