package agent

import (
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/llm"
)

// The context manager keeps each model call inside the model's context
// window. It counts the tokens of the conversation the next call will send
// — the prompt tokens the provider reported for the last call, plus an
// estimate of what was added since — and, when they pass
// Config.CompactThreshold of the window, compacts the conversation: the
// model summarises its older part (goals, decisions, files touched, open
// tasks), a context.compacted event records the summary, and from then on
// model calls send the summary followed by the recent messages, verbatim.
// The log itself keeps every event: compaction changes what the model is
// sent, never what people see.

// messageOverhead is what a message costs beyond its text (role and
// framing), in tokens, as providers count it.
const messageOverhead = 4

// ContextUsage is how much of the model's context window a conversation
// takes.
type ContextUsage struct {
	// Tokens is the size of the conversation's next prompt: the prompt the
	// provider reported for the last model call (or the size recorded by
	// the last compaction) plus an estimate of what was added since. With
	// no such count it is an estimate of the transcript alone.
	Tokens int
	// Messages is the length of the transcript the model is sent
	// (Transcript), compaction summary included.
	Messages int
	// Calibrated says Tokens starts from a count the provider reported or a
	// compaction recorded.
	Calibrated bool
}

// MeasureContext measures a thread's conversation from its history events
// (store.Log.History), counting text with tok.
func MeasureContext(events []event.Event, tok llm.Tokenizer) ContextUsage {
	base, from, calibrated := 0, 0, false
	for i, e := range events {
		switch p := e.Payload.(type) {
		case event.Usage:
			if p.Purpose != "" || p.PromptTokens <= 0 {
				continue // a side call: its prompt is not the conversation
			}
			// The call's own output is in the log just before its usage;
			// it is part of the next prompt.
			out := 0
			for j := i - 1; j >= from && isOutput(events[j]); j-- {
				out += eventTokens(events[j], tok)
			}
			base, from, calibrated = int(p.PromptTokens)+out, i+1, true
		case event.ContextCompacted:
			base, from, calibrated = p.NewTokens, i+1, true
		}
	}
	tokens := base
	for _, e := range events[from:] {
		tokens += eventTokens(e, tok)
	}
	return ContextUsage{Tokens: tokens, Messages: len(Transcript(events)), Calibrated: calibrated}
}

// isOutput reports whether e is something a model call produced for the
// conversation.
func isOutput(e event.Event) bool {
	switch p := e.Payload.(type) {
	case event.MessageCompleted:
		return p.Role == event.RoleAssistant && p.Purpose == ""
	case event.ToolCallCompleted, event.ReasoningCompleted:
		return true
	}
	return false
}

// eventTokens estimates what e adds to the transcript the model is sent.
func eventTokens(e event.Event, tok llm.Tokenizer) int {
	switch p := e.Payload.(type) {
	case event.MessageUser:
		return tok.Count(p.Text) + messageOverhead
	case event.MessageCompleted:
		if p.Role == event.RoleAssistant && p.Purpose == "" {
			return tok.Count(p.Text) + messageOverhead
		}
	case event.ToolCallCompleted:
		return tok.Count(p.Name) + tok.Count(string(p.Arguments)) + messageOverhead
	case event.ToolExecCompleted:
		return tok.Count(p.Result) + messageOverhead
	}
	return 0
}

// messageTokens estimates the tokens of one transcript message.
func messageTokens(m llm.Message, tok llm.Tokenizer) int {
	n := tok.Count(m.Content) + messageOverhead
	for _, c := range m.ToolCalls {
		n += tok.Count(c.Name) + tok.Count(c.Arguments) + messageOverhead
	}
	return n
}

func messagesTokens(msgs []llm.Message, tok llm.Tokenizer) int {
	n := 0
	for _, m := range msgs {
		n += messageTokens(m, tok)
	}
	return n
}

// requestOverhead estimates what a call costs besides its messages: the
// system prompt and the tools' descriptions.
func requestOverhead(system string, specs []llm.ToolSpec, tok llm.Tokenizer) int {
	n := tok.Count(system) + messageOverhead
	for _, s := range specs {
		n += tok.Count(s.Name) + tok.Count(s.Description) + tok.Count(string(s.Parameters)) + messageOverhead
	}
	return n
}

// calibration is a count of the first len messages of a run's transcript
// (with the system prompt and tools) that the provider reported or a
// compaction recorded.
type calibration struct {
	tokens, len int
	ok          bool
}

// window is the model's context window, in tokens.
func (r *run) window() int {
	if r.a.cfg.ContextWindow > 0 {
		return r.a.cfg.ContextWindow
	}
	return llm.ContextWindow(r.model.Name())
}

func (r *run) tokenizer() llm.Tokenizer { return llm.TokenizerFor(r.model.Name()) }

// toolSpecs are the tools offered to the model, as it sees them.
func (r *run) toolSpecs() []llm.ToolSpec {
	var specs []llm.ToolSpec
	for _, s := range r.tools.Specs() {
		specs = append(specs, llm.ToolSpec{Name: s.Name, Description: s.Description, Parameters: s.InputSchema})
	}
	return specs
}

// contextTokens is the size of the next call's prompt with r.msgs.
func (r *run) contextTokens(specs []llm.ToolSpec) int {
	tok := r.tokenizer()
	if c := r.calib; c.ok && c.len <= len(r.msgs) {
		return c.tokens + messagesTokens(r.msgs[c.len:], tok)
	}
	return requestOverhead(r.system, specs, tok) + messagesTokens(r.msgs, tok)
}

// calibrateFrom starts the run's count from the thread's log.
func (r *run) calibrateFrom(hist []event.Event) {
	if u := MeasureContext(hist, r.tokenizer()); u.Calibrated {
		r.calib = calibration{tokens: u.Tokens, len: len(r.msgs), ok: true}
	}
}

// calibrate records the prompt the provider reported for a call that sent
// the first n messages of r.msgs.
func (r *run) calibrate(n int) {
	if r.lastUsage.PromptTokens > 0 && n <= len(r.msgs) {
		r.calib = calibration{tokens: int(r.lastUsage.PromptTokens), len: n, ok: true}
	}
}
