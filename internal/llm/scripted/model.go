// Package scripted is agentwire's deterministic, offline language model. It
// plays a Scenario: YAML rules that match the user's last message and
// script the model turns that answer it — streamed text, reasoning, tool
// calls with their arguments, usage, finish reasons, failures — at a
// configurable pace. A server with no model configured runs the built-in
// Default scenario; frontend teams and tests write their own to produce
// every canonical event on demand. docs/SCENARIOS.md describes the format.
//
// The model keeps no state between calls. Each request carries the whole
// conversation; the model finds the last user message, picks the first
// rule that matches it, and plays the step numbered by how many assistant
// turns already followed that message. A restarted server, or a second
// server replaying the same thread, continues exactly where the first
// stood, and the same request always streams the same chunks.
package scripted

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"iter"
	"log/slog"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/agentwire/agentwire/internal/llm"
)

// Model plays a Scenario. It implements llm.Model and is safe for
// concurrent use.
type Model struct {
	scn    *Scenario
	pacing *Pacing
	log    *slog.Logger
}

var _ llm.Model = (*Model)(nil)

// Option configures a Model.
type Option func(*Model)

// WithPacing replaces every pacing the scenario sets, at every level, with
// p. WithPacing(Pacing{}) plays scenarios instantly, which is what tests of
// other packages usually want.
func WithPacing(p Pacing) Option {
	return func(m *Model) { m.pacing = &p }
}

// WithLogger logs, at debug level, which rule and step each call plays.
func WithLogger(l *slog.Logger) Option {
	return func(m *Model) {
		if l != nil {
			m.log = l
		}
	}
}

// New returns a Model playing scn; nil plays Default().
func New(scn *Scenario, opts ...Option) *Model {
	if scn == nil {
		scn = Default()
	}
	m := &Model{scn: scn, log: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(m)
	}
	return m
}

// Name is "scripted", or "scripted:<scenario name>" when the scenario has a
// name.
func (m *Model) Name() string {
	if m.scn.name == "" {
		return "scripted"
	}
	return "scripted:" + m.scn.name
}

// Check returns nil: the scripted model has nothing to reach.
func (m *Model) Check(context.Context) error { return nil }

// Error is the failure an error step scripts; its text is the step's error.
type Error struct {
	Message string
}

// Error returns the scripted message as written, so that it reaches people
// unchanged.
func (e *Error) Error() string { return e.Message }

// Stream plays the step of the scenario that answers req. Delays wait on
// ctx, so cancelling it ends the stream at once with ctx.Err(). It ignores
// req.Structured: a scenario writes a structured answer as text.
func (m *Model) Stream(ctx context.Context, req llm.Request) iter.Seq2[llm.Chunk, error] {
	return func(yield func(llm.Chunk, error) bool) {
		beats, err := m.plan(req)
		if err != nil {
			yield(llm.Chunk{}, err)
			return
		}
		for _, b := range beats {
			if err := wait(ctx, b.delay); err != nil {
				yield(llm.Chunk{}, err)
				return
			}
			if b.err != nil {
				yield(llm.Chunk{}, b.err)
				return
			}
			if !yield(b.chunk, nil) {
				return
			}
		}
	}
}

// wait sleeps for d unless ctx ends first. It reports ctx's error even for
// a zero d, so a cancelled stream stops between chunks.
func wait(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// beat is one planned moment of a stream: a chunk (or the scripted error)
// and the delay before it.
type beat struct {
	delay time.Duration
	chunk llm.Chunk
	err   error
}

// pick returns the first rule that matches, else the first fallback rule,
// else nil.
func (m *Model) pick(user, system string) *rule {
	var fallback *rule
	for _, r := range m.scn.rules {
		if r.match == nil {
			if fallback == nil {
				fallback = r
			}
			continue
		}
		if r.match.matches(user, system) {
			return r
		}
	}
	return fallback
}

// Replies when the script has nothing to say.
const (
	noRuleReply = "The scripted model has no rule for this message."
	doneReply   = "That is the end of this script."
)

// plan decides everything the stream for req will yield. It is a pure
// function of the scenario and req.
func (m *Model) plan(req llm.Request) ([]beat, error) {
	tc := readTurn(req.Messages)
	r := m.pick(tc.user, req.System)
	var st *step
	pace := pacing{}
	switch {
	case r == nil:
		st = &step{text: text{lit: noRuleReply}}
		m.log.Debug("scripted: no rule matches", "scenario", m.scn.name)
	case tc.step < len(r.steps):
		st = r.steps[tc.step]
		pace = r.pacing
		m.log.Debug("scripted: playing", "scenario", m.scn.name, "rule", r.name, "at", r.where, "step", tc.step+1)
	default:
		st = &step{text: text{lit: doneReply}}
		for _, s := range r.steps {
			if !s.text.empty() {
				st = &step{text: s.text, chunk: s.chunk}
			}
		}
		pace = r.pacing
		m.log.Debug("scripted: steps exhausted", "scenario", m.scn.name, "rule", r.name, "at", r.where, "turn", tc.step+1)
	}
	p := pace.over(st.pacing).resolve()
	if m.pacing != nil {
		p = *m.pacing
	}

	reasoning, err := st.reasoning.render(tc)
	if err != nil {
		return nil, fmt.Errorf("scripted: %w", err)
	}
	reply, err := st.text.render(tc)
	if err != nil {
		return nil, fmt.Errorf("scripted: %w", err)
	}
	b := &builder{pacing: p}
	for _, f := range split(reasoning, st.chunk) {
		b.add(llm.Chunk{Type: llm.ChunkReasoning, Text: f}, true)
	}
	if st.signature != "" {
		b.add(llm.Chunk{Type: llm.ChunkReasoningSignature, Signature: st.signature}, false)
	}
	for _, f := range split(reply, st.chunk) {
		b.add(llm.Chunk{Type: llm.ChunkText, Text: f}, true)
	}
	if !st.err.empty() {
		msg, err := st.err.render(tc)
		if err != nil {
			return nil, fmt.Errorf("scripted: %w", err)
		}
		b.fail(&Error{Message: msg})
		return b.beats, nil
	}

	completion := utf8.RuneCountInString(reasoning) + utf8.RuneCountInString(reply)
	for i, c := range st.calls {
		a, err := c.args.render(tc)
		if err != nil {
			return nil, fmt.Errorf("scripted: %w", err)
		}
		id := c.id
		if id == "" {
			id = callID(req.Messages, i)
		}
		b.add(llm.Chunk{Type: llm.ChunkToolStart, Index: i, CallID: id, Name: c.name}, false)
		n := c.chunk
		if n == 0 {
			n = argsChunk
		}
		for _, f := range split(a, n) {
			b.add(llm.Chunk{Type: llm.ChunkToolDelta, Index: i, Arguments: f}, true)
		}
		b.add(llm.Chunk{Type: llm.ChunkToolDone, Index: i, CallID: id, Name: c.name, Arguments: a}, false)
		completion += utf8.RuneCountInString(c.name) + utf8.RuneCountInString(a)
	}

	u := llm.Usage{PromptTokens: tokens(promptChars(req)), CompletionTokens: tokens(completion)}
	if st.usage != nil {
		if st.usage.PromptTokens != nil {
			u.PromptTokens = *st.usage.PromptTokens
		}
		if st.usage.CompletionTokens != nil {
			u.CompletionTokens = *st.usage.CompletionTokens
		}
	}
	b.add(llm.Chunk{Type: llm.ChunkUsage, Usage: u}, false)

	finish := st.finish
	if finish == "" {
		finish = llm.FinishStop
		if len(st.calls) > 0 {
			finish = llm.FinishToolCalls
		}
	}
	b.add(llm.Chunk{Type: llm.ChunkFinish, Finish: finish}, false)
	return b.beats, nil
}

// builder lays out beats with their delays: the start delay before the
// first, the chunk delay before every later fragment.
type builder struct {
	pacing  Pacing
	beats   []beat
	started bool
}

func (b *builder) delay(fragment bool) time.Duration {
	if !b.started {
		b.started = true
		return b.pacing.StartDelay
	}
	if fragment {
		return b.pacing.ChunkDelay
	}
	return 0
}

func (b *builder) add(c llm.Chunk, fragment bool) {
	b.beats = append(b.beats, beat{delay: b.delay(fragment), chunk: c})
}

func (b *builder) fail(err error) {
	b.beats = append(b.beats, beat{delay: b.delay(true), err: err})
}

// tokens estimates the tokens of n characters, at about four per token.
func tokens(n int) int64 { return int64((n + 3) / 4) }

// promptChars counts the characters a request sends.
func promptChars(req llm.Request) int {
	n := utf8.RuneCountInString(req.System)
	for _, m := range req.Messages {
		n += utf8.RuneCountInString(m.Content) + utf8.RuneCountInString(m.Reasoning)
		for _, c := range m.ToolCalls {
			n += utf8.RuneCountInString(c.Name) + utf8.RuneCountInString(c.Arguments)
		}
	}
	for _, t := range req.Tools {
		n += utf8.RuneCountInString(t.Name) + utf8.RuneCountInString(t.Description) + len(t.Parameters)
	}
	return n
}

// callID names call i of the turn that answers msgs. It is derived from
// the conversation, so the same request gets the same ids while every turn
// of a thread gets new ones.
func callID(msgs []llm.Message, i int) string {
	h := sha256.New()
	field := func(s string) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	for _, m := range msgs {
		field(string(m.Role))
		field(m.Content)
		field(m.ToolCallID)
		field(m.Name)
		field(strconv.Itoa(len(m.ToolCalls)))
		for _, c := range m.ToolCalls {
			field(c.ID)
			field(c.Name)
			field(c.Arguments)
		}
	}
	return fmt.Sprintf("call_%x_%d", h.Sum(nil)[:8], i)
}
