package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/llm"
)

// summaryPrefix opens the message that stands for the compacted part of a
// transcript.
const summaryPrefix = "Summary of the conversation so far:\n\n"

// Compaction strategies, as context.compacted records them.
const (
	compactThreshold = "threshold"
	compactManual    = "manual"
)

// summarySystem is the instruction of the call that summarises.
const summarySystem = `You are compacting the conversation of an AI coding agent with its user, so that the agent can carry on with less context. The conversation follows. Write a structured summary in Markdown with exactly these sections:

## Goals
What the user wants, in their terms.
## Decisions
What was decided or found out, and why.
## Files touched
Every file read, created, changed or deleted, and what changed.
## Open tasks
What remains to be done, the next step first.

Keep names, paths, commands, numbers and error messages exact. Do not invent anything. Write only the summary.`

// maxResultChars caps each tool result as the summariser sees it.
const maxResultChars = 4000

// minSummarised is the least a compaction summarises, in tokens: a
// summary with its four headed sections seldom takes fewer, so less is
// not worth a model call.
const minSummarised = 256

// fitContext compacts the transcript before a model call when the call
// would pass the threshold share of the context window. A compaction that
// fails, or whose summary would not be smaller, is not tried again in the
// run; the call goes ahead uncompacted.
func (r *run) fitContext(ctx context.Context, specs []llm.ToolSpec) {
	t := r.a.cfg.CompactThreshold
	if t <= 0 || r.compactFailed {
		return
	}
	tokens := r.contextTokens(specs)
	if float64(tokens) < t*float64(r.window()) {
		return
	}
	if messagesTokens(r.msgs, r.tokenizer()) <= r.keepBudget() {
		// The system prompt and the tools fill the window, not the
		// conversation: a summary would not make room.
		return
	}
	why, err := r.compact(ctx, specs, tokens, compactThreshold)
	switch {
	case err != nil:
		r.compactFailed = true
		r.log.Warn("context compaction failed; the call goes ahead with the whole conversation", "tokens", tokens, "err", err)
	case why != "":
		r.compactFailed = why != whyNothing && why != whyTooShort // a summary was thrown away
		r.log.Info("the conversation was not compacted", "tokens", tokens, "why", why)
	}
}

// compactRun is a whole run that only compacts (Spec.Compact). When it
// compacts nothing its end says why: run.completed with reason
// nothing_to_compact and the reason in words as its reply.
func (r *run) compactRun(ctx context.Context) {
	specs := r.toolSpecs()
	why, err := r.compact(ctx, specs, r.contextTokens(specs), compactManual)
	switch {
	case err != nil:
		r.end(ctx, fmt.Errorf("compaction failed: %w", err), event.CodeModelError)
	case why != "":
		r.log.Info("the conversation was not compacted", "why", why)
		r.emit(event.RunCompleted{Reason: "nothing_to_compact", Reply: why})
	default:
		r.emit(event.RunCompleted{Reason: "compacted"})
	}
}

// Why a compaction compacted nothing.
const (
	whyNothing  = "There is nothing to compact: the conversation is empty or already a summary."
	whyTooShort = "There is nothing to compact yet: the conversation is too short for a summary to make it smaller."
)

// compact replaces the older part of r.msgs with the model's summary of it
// and records context.compacted, whose counts go from oldTokens (the
// call's size as r.contextTokens counts it) to the same count of the
// compacted call. It compacts nothing, and says why, when there is
// nothing to summarise, when what it would summarise is too short to gain
// (without asking the model), or when the summary is not smaller than
// what it would replace (the summary is thrown away).
func (r *run) compact(ctx context.Context, specs []llm.ToolSpec, oldTokens int, strategy string) (why string, err error) {
	tok := r.tokenizer()
	k := splitForSummary(r.msgs, r.keepBudget(), tok)
	if k == 0 || k == 1 && isSummary(r.msgs[0]) {
		return whyNothing, nil
	}
	replaced := messagesTokens(r.msgs[:k], tok)
	if replaced < minSummarised {
		return whyTooShort, nil
	}
	summary, err := r.summarise(ctx, r.msgs[:k])
	if err != nil {
		return "", err
	}
	msgs := append([]llm.Message{summaryMessage(summary)}, r.msgs[k:]...)
	if n := messageTokens(msgs[0], tok); n >= replaced {
		return fmt.Sprintf("Nothing was compacted: the summary (%d tokens) is not smaller than the part of the conversation it would replace (%d tokens).", n, replaced), nil
	}
	// Both counts count the same things: the estimates of the call before
	// and after (system prompt, tools and messages) set the new count's
	// share of the old one, which may be the provider's (a server that
	// leaves cached tokens out reports less than the whole prompt).
	overhead := requestOverhead(r.system, specs, tok)
	before, after := overhead+messagesTokens(r.msgs, tok), overhead+messagesTokens(msgs, tok)
	newTokens := int(int64(max(oldTokens, 0)) * int64(after) / int64(before))
	r.emit(event.ContextCompacted{OldTokens: oldTokens, NewTokens: newTokens, Strategy: strategy,
		Summary: summary, KeptMessages: len(r.msgs) - k})
	r.log.Info("compacted the conversation", "strategy", strategy, "old_tokens", oldTokens, "new_tokens", newTokens,
		"summarised", k, "kept", len(r.msgs)-k)
	r.msgs = msgs
	r.calib = calibration{tokens: newTokens, len: len(msgs), ok: true}
	return "", nil
}

// keepBudget is how many tokens of the most recent messages a compaction
// keeps verbatim: a quarter of the window, or half the threshold's share
// when that is less, so that a compacted conversation is well under the
// threshold.
func (r *run) keepBudget() int {
	share := 0.25
	if t := r.a.cfg.CompactThreshold; t > 0 {
		share = min(share, t/2)
	}
	return int(share * float64(r.window()))
}

// splitForSummary returns how many leading messages of msgs to summarise:
// the rest, the most recent messages that fit in keep tokens, stay as they
// are. The kept part never starts with a tool result (its call would be
// summarised away). When everything fits, all but the last user turn is
// summarised; with a single turn, everything.
func splitForSummary(msgs []llm.Message, keep int, tok llm.Tokenizer) int {
	k, used := len(msgs), 0
	for i := len(msgs) - 1; i >= 0; i-- {
		used += messageTokens(msgs[i], tok)
		if used > keep {
			break
		}
		if msgs[i].Role != llm.RoleTool {
			k = i
		}
	}
	if k > 0 {
		return k
	}
	for i := len(msgs) - 1; i > 0; i-- {
		if msgs[i].Role == llm.RoleUser {
			return i
		}
	}
	return len(msgs)
}

func summaryMessage(summary string) llm.Message {
	return llm.Message{Role: llm.RoleUser, Content: summaryPrefix + summary}
}

func isSummary(m llm.Message) bool {
	return m.Role == llm.RoleUser && strings.HasPrefix(m.Content, summaryPrefix)
}

// summarise asks the model for a structured summary of msgs. The call is a
// side call: it shows in no message event, only in a usage event marked
// event.PurposeSummary.
func (r *run) summarise(ctx context.Context, msgs []llm.Message) (string, error) {
	// What the summariser reads must fit its own window, with room for
	// the instruction and the answer.
	limit := int(float64(r.window()) * 0.6 * 3)
	req := llm.Request{System: summarySystem, Messages: []llm.Message{{Role: llm.RoleUser, Content: renderTranscript(msgs, limit)}}}
	var (
		text     strings.Builder
		usage    *llm.Usage
		finished bool
	)
	for ch, err := range r.call(ctx, r.model, req, "compaction") {
		if err != nil {
			return "", err
		}
		switch ch.Type {
		case llm.ChunkText:
			text.WriteString(ch.Text)
		case llm.ChunkUsage:
			u := ch.Usage
			usage = &u
		case llm.ChunkFinish:
			finished = true
		}
	}
	if usage != nil {
		e := r.usage(r.model, *usage, event.PurposeSummary)
		e.Model = modelName(r.model)
		r.emit(e)
	}
	if !finished {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		return "", errors.New("the model's stream ended without finishing")
	}
	s := strings.TrimSpace(text.String())
	if s == "" {
		return "", errors.New("the model returned an empty summary")
	}
	return s, nil
}

// renderTranscript writes msgs as text for the summariser, at most limit
// bytes: when longer, its start and its end are kept.
func renderTranscript(msgs []llm.Message, limit int) string {
	var b strings.Builder
	for _, m := range msgs {
		switch {
		case isSummary(m):
			b.WriteString("### Summary of the earlier conversation\n" + strings.TrimPrefix(m.Content, summaryPrefix) + "\n\n")
		case m.Role == llm.RoleUser:
			b.WriteString("### User\n" + m.Content + "\n\n")
		case m.Role == llm.RoleAssistant:
			b.WriteString("### Assistant\n")
			if m.Content != "" {
				b.WriteString(m.Content + "\n")
			}
			for _, c := range m.ToolCalls {
				b.WriteString("(calls " + c.Name + " " + c.Arguments + ")\n")
			}
			b.WriteString("\n")
		case m.Role == llm.RoleTool:
			what := "Result"
			if m.IsError {
				what = "Failed result"
			}
			content := m.Content
			if len(content) > maxResultChars {
				content = truncate(content, maxResultChars)
			}
			b.WriteString("### " + what + " of " + m.Name + "\n" + content + "\n\n")
		}
	}
	s := b.String()
	if limit > 0 && len(s) > limit {
		start := len(s) - (limit - limit/5)
		for start < len(s) && !utf8.RuneStart(s[start]) {
			start++
		}
		s = truncate(s, limit/5) + "\n\n[... part of the conversation left out ...]\n\n" + s[start:]
	}
	return s
}
