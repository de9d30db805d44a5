package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/llm"
	"github.com/agentwire/agentwire/internal/tools"
	"github.com/agentwire/agentwire/internal/workflow"
)

// group plays a workflow's group chat (Spec.Workflow): agents with their own
// prompts, tools and models take turns on the user's message. Before each
// turn the workflow's speaker selection picks the agent (agent.selected);
// the agent's turn is a ReAct loop of its own, whose events carry its name.
// The run ends with run.completed whose reason is
//   - terminated when an agent's message contains the workflow's keyword,
//   - completed when the chat goes back to the user: after the agent named
//     by termination.after (or the only agent of a one-agent workflow), or
//     when auto or manual selection answers DONE,
//   - max_rounds when max_rounds turns have been taken,
//
// or with run.failed or run.cancelled as a react run does.
//
// Each agent sees the user's messages, its own turns whole (tool calls and
// results included), and the other agents' turns as user messages
// "name: text" (their tool calls stay private), which is how AG2 shows a
// group chat to each of its agents.
func group(ctx context.Context, r *run) {
	wf := r.spec.Workflow
	if wf == nil || len(wf.Agents) == 0 {
		r.end(ctx, errors.New("the group strategy needs a workflow with agents"), event.CodeInternal)
		return
	}
	members, err := r.members(wf)
	if err != nil {
		r.end(ctx, err, event.CodeInternal)
		return
	}
	hist, err := r.em.j.History(ctx)
	if err != nil {
		r.end(ctx, fmt.Errorf("read history: %w", err), event.CodeInternal)
		return
	}
	g := &groupChat{r: r, wf: wf, members: members, segs: segments(hist), model: r.model, system: r.system}
	g.play(ctx)
}

// member is an agent of the workflow as this run runs it.
type member struct {
	workflow.Agent
	system string
	tools  Toolbox
	model  llm.Model
}

// members resolves the workflow's agents against the run: an agent's tools
// are those of its list that the run offers (a tool the server does not
// offer, for example under --approval-policy read-only, is left out and
// logged), its model one of Spec.Models.
func (r *run) members(wf *workflow.Workflow) ([]member, error) {
	out := make([]member, len(wf.Agents))
	for i, a := range wf.Agents {
		m := member{Agent: a, system: r.system, tools: r.tools, model: r.model}
		if a.System != "" {
			m.system = a.System
		}
		if a.Tools != nil {
			var names []string
			for _, n := range a.Tools {
				if _, ok := r.tools.Get(n); !ok {
					r.log.Warn("workflow agent's tool is not offered; the agent runs without it", "workflow", wf.Name, "agent", a.Name, "tool", n)
					continue
				}
				names = append(names, n)
			}
			m.tools = subset{base: r.tools, names: names}
		}
		if a.Model != "" {
			mod, ok := r.spec.Models[a.Model]
			if !ok || mod == nil {
				return nil, fmt.Errorf("workflow %q: agent %q: model %q is not available", wf.Name, a.Name, a.Model)
			}
			m.model = mod
		}
		out[i] = m
	}
	return out, nil
}

// subset is the tools of base named in names.
type subset struct {
	base  Toolbox
	names []string
}

func (s subset) Get(name string) (tools.Tool, bool) {
	if !slices.Contains(s.names, name) {
		return nil, false
	}
	return s.base.Get(name)
}

func (s subset) Specs() []tools.Spec {
	var out []tools.Spec
	for _, sp := range s.base.Specs() {
		if slices.Contains(s.names, sp.Name) {
			out = append(out, sp)
		}
	}
	return out
}

// segment is a stretch of the conversation with one speaker: a user
// message (speaker ""), or an agent's turns.
type segment struct {
	speaker string
	msgs    []llm.Message
}

// segments cuts a thread's history into speakers' stretches: each user
// message is one; each run.started and agent.selected starts one of the
// agent it names, rebuilt with Transcript.
func segments(hist []event.Event) []segment {
	var (
		out     []segment
		speaker = "assistant"
		cur     []event.Event
	)
	flush := func() {
		if len(cur) > 0 {
			if msgs := Transcript(cur); len(msgs) > 0 {
				out = append(out, segment{speaker: speaker, msgs: msgs})
			}
		}
		cur = nil
	}
	for _, e := range hist {
		switch p := e.Payload.(type) {
		case event.MessageUser:
			flush()
			out = append(out, segment{msgs: []llm.Message{{Role: llm.RoleUser, Content: p.Text}}})
		case event.RunStarted:
			flush()
			speaker = p.Agent
			if speaker == "" {
				speaker = "assistant"
			}
		case event.AgentSelected:
			flush()
			speaker = p.Agent
		default:
			cur = append(cur, e)
		}
	}
	flush()
	return out
}

// groupChat is the state of one run of a workflow.
type groupChat struct {
	r       *run
	wf      *workflow.Workflow
	members []member
	segs    []segment
	// model and system are the run's own, for the auto selector.
	model  llm.Model
	system string
	// warned: a non-interactive manual run has said it falls back.
	warned bool
}

func (g *groupChat) play(ctx context.Context) {
	r := g.r
	last := -1 // the last speaker; -1 is the user
	for round := 1; ; round++ {
		if round > g.wf.MaxRounds {
			r.emit(event.RunCompleted{Reason: event.ReasonMaxRounds, Reply: r.lastReply})
			return
		}
		next, how, err := g.next(ctx, last)
		if err != nil {
			r.end(ctx, err, event.CodeModelError)
			return
		}
		if next < 0 {
			r.emit(event.RunCompleted{Reason: event.ReasonCompleted, Reply: r.lastReply})
			return
		}
		m := g.members[next]
		r.emit(event.AgentSelected{Agent: m.Name, Round: round, Selection: how})
		terminated, ok := g.turn(ctx, m)
		if !ok {
			return
		}
		last = next
		switch {
		case terminated:
			r.emit(event.RunCompleted{Reason: event.ReasonTerminated, Reply: r.lastReply})
			return
		case len(g.members) == 1 || strings.EqualFold(g.wf.After, m.Name):
			r.emit(event.RunCompleted{Reason: event.ReasonCompleted, Reply: r.lastReply})
			return
		}
	}
}

// turn runs one agent's turn: model calls and tool rounds until it answers
// without calling a tool. It reports whether the agent said the keyword,
// and false when the run ended (its end is written).
func (g *groupChat) turn(ctx context.Context, m member) (terminated, ok bool) {
	r := g.r
	r.name, r.system, r.tools, r.model = m.Name, m.system, m.tools, m.model
	r.msgs = g.view(m.Name)
	// Each agent's view is a different transcript: the last call's count
	// does not measure it.
	r.calib = calibration{}
	var said []llm.Message
	defer func() { g.segs = append(g.segs, segment{speaker: m.Name, msgs: said}) }()
	for step := 0; ; step++ {
		if step == r.a.cfg.MaxSteps {
			r.emit(event.RunFailed{Code: event.CodeStepLimit, Message: fmt.Sprintf("Agent %s reached its limit of %d model calls in one turn without a final answer.", m.Name, r.a.cfg.MaxSteps)})
			return false, false
		}
		turn, err := r.think(ctx)
		if err != nil {
			r.end(ctx, fmt.Errorf("model error: %w", err), event.CodeModelError)
			return false, false
		}
		r.msgs = append(r.msgs, turn)
		said = append(said, turn)
		if turn.Content != "" {
			r.lastReply = turn.Content
			if g.wf.Keyword != "" && strings.Contains(turn.Content, g.wf.Keyword) {
				terminated = true
			}
		}
		if len(turn.ToolCalls) == 0 {
			return terminated, true
		}
		n := len(r.msgs)
		err = r.act(ctx, turn.ToolCalls)
		said = append(said, r.msgs[n:]...)
		if err != nil {
			r.end(ctx, err, event.CodeToolError)
			return false, false
		}
	}
}

// view is the conversation as agent name sees it.
func (g *groupChat) view(name string) []llm.Message {
	// Consecutive user messages stay apart: the provider adapters that
	// need alternating roles join them.
	var out []llm.Message
	user := func(text string) { out = append(out, llm.Message{Role: llm.RoleUser, Content: text}) }
	for _, s := range g.segs {
		switch {
		case s.speaker == "":
			for _, m := range s.msgs {
				user(m.Content)
			}
		case strings.EqualFold(s.speaker, name):
			out = append(out, s.msgs...)
		default:
			for _, m := range s.msgs {
				if m.Role == llm.RoleAssistant && strings.TrimSpace(m.Content) != "" {
					user(s.speaker + ": " + m.Content)
				}
			}
		}
	}
	return out
}

// next picks the next speaker after last (-1: the user): its index, or -1
// when the chat goes back to the user, and how it was picked.
func (g *groupChat) next(ctx context.Context, last int) (int, string, error) {
	n := len(g.members)
	robin := (last + 1) % n
	if n == 1 {
		return 0, event.SelectionOnly, nil
	}
	switch g.wf.Selection {
	case workflow.Auto:
		return g.auto(ctx, last)
	case workflow.Manual:
		if !g.r.spec.Interactive {
			if !g.warned {
				g.warned = true
				g.r.systemMessage("This workflow lets a person pick each speaker, but this conversation's connection cannot ask: the agents speak in turn instead.")
			}
			return robin, event.SelectionRoundRobin, nil
		}
		return g.manual(ctx, last)
	}
	return robin, event.SelectionRoundRobin, nil
}

// pick reads an answer naming the next speaker: an agent's name (ignoring
// case, quotes and punctuation around it), its number from 1 when numbers
// are allowed, or done or user to go back to the user. An answer that
// mentions exactly one agent's name among other words picks it. ok is
// false when the answer picks nobody.
func (g *groupChat) pick(answer string, numbers bool) (idx int, ok bool) {
	t := strings.TrimFunc(answer, func(c rune) bool { return !unicode.IsLetter(c) && !unicode.IsDigit(c) })
	if strings.EqualFold(t, "done") || strings.EqualFold(t, "user") {
		return -1, true
	}
	if numbers {
		if i, err := strconv.Atoi(t); err == nil && i >= 1 && i <= len(g.members) {
			return i - 1, true
		}
	}
	for i, m := range g.members {
		if strings.EqualFold(t, m.Name) {
			return i, true
		}
	}
	words := strings.FieldsFunc(answer, func(c rune) bool {
		return !unicode.IsLetter(c) && !unicode.IsDigit(c) && c != '_' && c != '-'
	})
	found := -1
	for i, m := range g.members {
		if slices.ContainsFunc(words, func(w string) bool { return strings.EqualFold(w, m.Name) }) {
			if found >= 0 {
				return 0, false
			}
			found = i
		}
	}
	if found >= 0 {
		return found, true
	}
	if slices.ContainsFunc(words, func(w string) bool { return w == "DONE" }) {
		return -1, true
	}
	return 0, false
}

// selectorIntro starts the auto selector's system prompt; a scenario
// answers the selector with a rule matching {system: "next speaker"}.
const selectorIntro = "You are choosing the next speaker in a group chat of AI agents working for a user."

// auto asks the model for the next speaker. An answer that picks nobody is
// asked again once, with the list of names; a second one falls back to the
// next agent in list order.
func (g *groupChat) auto(ctx context.Context, last int) (int, string, error) {
	r := g.r
	r.emit(event.NodeEntered{Node: "select"})
	var b strings.Builder
	b.WriteString(selectorIntro + " The agents are:\n")
	for _, m := range g.members {
		fmt.Fprintf(&b, "- %s: %s\n", m.Name, m.Description)
	}
	b.WriteString("\nRead the conversation and answer with the name of the one agent who should speak next, and nothing else. Answer DONE when the user's request has been dealt with and it is the user's turn.")
	msgs := []llm.Message{{Role: llm.RoleUser, Content: g.question(last)}}
	first := ""
	for attempt := 0; attempt < 2; attempt++ {
		text, err := g.quiet(ctx, llm.Request{System: b.String(), Messages: msgs, Structured: g.speakerSchema()})
		if err != nil {
			r.emit(event.NodeExited{Node: "select", Error: err.Error()})
			return 0, "", fmt.Errorf("speaker selection: %w", err)
		}
		if idx, ok := g.read(text); ok {
			r.emit(event.NodeExited{Node: "select"})
			return idx, event.SelectionAuto, nil
		}
		r.log.Info("the speaker selector named no agent", "answer", text, "attempt", attempt+1)
		if attempt == 0 {
			first = text
		}
		msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, Content: text},
			llm.Message{Role: llm.RoleUser, Content: fmt.Sprintf("%q is not one of the names. Answer with exactly one of: %s, or DONE.", truncateText(text, 200), strings.Join(g.wf.Names(), ", "))})
	}
	next := (last + 1) % len(g.members)
	r.emit(event.NodeExited{Node: "select", Error: "no agent named; the next agent in order speaks"})
	r.note(fmt.Sprintf("The speaker selector's answer named no agent of the workflow, even after a retry (%q), so %s speaks next, as the agents' order says.",
		truncateText(strings.TrimSpace(first), 200), g.members[next].Name))
	return next, event.SelectionFallback, nil
}

// speakerSchema is the structure of the selector's answer: one of the
// agents' names, or DONE.
func (g *groupChat) speakerSchema() *llm.Schema {
	names, _ := json.Marshal(append(g.wf.Names(), "DONE"))
	return schema("next_speaker", `{"type": "object", "properties": {"speaker": {"type": "string", "enum": `+string(names)+`,
		"description": "the agent who speaks next, or DONE to hand the chat back to the user"}},
	"required": ["speaker"], "additionalProperties": false}`)
}

// read reads the selector's answer: the speaker of a JSON answer, else
// the answer as words (pick).
func (g *groupChat) read(answer string) (int, bool) {
	var out struct {
		Speaker string `json:"speaker"`
	}
	if decodeJSON(answer, &out) == nil && strings.TrimSpace(out.Speaker) != "" {
		if idx, ok := g.pick(out.Speaker, false); ok {
			return idx, true
		}
	}
	return g.pick(answer, false)
}

// question is the selector's user message: the conversation so far (its
// last 20 stretches, each cut to 2,000 characters) and who spoke last.
func (g *groupChat) question(last int) string {
	var b strings.Builder
	b.WriteString("Conversation so far:\n")
	segs := g.segs[max(0, len(g.segs)-20):]
	for _, s := range segs {
		who := s.speaker
		if who == "" {
			who = "user"
		}
		for _, m := range s.msgs {
			if (m.Role == llm.RoleUser || m.Role == llm.RoleAssistant) && strings.TrimSpace(m.Content) != "" {
				fmt.Fprintf(&b, "\n%s: %s\n", who, truncateText(m.Content, 2000))
			}
		}
	}
	if last < 0 {
		b.WriteString("\nThe last speaker was the user.")
	} else {
		fmt.Fprintf(&b, "\nThe last speaker was %s.", g.members[last].Name)
	}
	fmt.Fprintf(&b, " Who speaks next? Answer with one of: %s, or DONE.", strings.Join(g.wf.Names(), ", "))
	return b.String()
}

// quiet makes a model call whose text is for the runtime, not the
// conversation: only its usage is recorded (purpose selection).
func (g *groupChat) quiet(ctx context.Context, req llm.Request) (string, error) {
	var text strings.Builder
	var usage []llm.Usage
	finished := false
	var err error
	for ch, e := range g.r.call(ctx, g.model, req, "speaker selection") {
		if e != nil {
			err = e
			break
		}
		switch ch.Type {
		case llm.ChunkText:
			text.WriteString(ch.Text)
		case llm.ChunkUsage:
			usage = append(usage, ch.Usage)
		case llm.ChunkFinish:
			finished = true
		}
	}
	for _, u := range usage {
		g.r.emit(g.r.usage(g.model, u, event.PurposeSelection))
	}
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err == nil && !finished {
		err = errors.New("the model's stream ended without finishing")
	}
	return text.String(), err
}

// manual asks a person for the next speaker, through an input request
// answered with an agent's name or number, or done. A wrong answer gets a
// system message and the question again; the timeout
// (selection_timeout_seconds) and a third wrong answer fall back to the
// next agent in list order.
func (g *groupChat) manual(ctx context.Context, last int) (int, string, error) {
	r := g.r
	var b strings.Builder
	b.WriteString("Who speaks next? Answer with an agent's name or number, or done to end the chat:")
	for i, m := range g.members {
		fmt.Fprintf(&b, "\n%d. %s", i+1, m.Name)
		if m.Description != "" {
			b.WriteString(": " + m.Description)
		}
	}
	prompt := b.String()
	robin := (last + 1) % len(g.members)
	timeout := g.wf.SelectionTimeoutSeconds
	r.emit(event.NodeEntered{Node: "select"})
	for attempt := 0; attempt < 3; attempt++ {
		id := "input_" + event.NewID()
		wait := r.inbox.register(id, event.CommandInput)
		r.emit(event.InputRequested{RequestID: id, Prompt: prompt, TimeoutSeconds: timeout})
		if err := r.flush(); err != nil {
			r.inbox.unregister(id)
			return 0, "", err
		}
		wctx := ctx
		cancel := func() {}
		if timeout > 0 {
			wctx, cancel = context.WithTimeout(ctx, time.Duration(timeout)*time.Second)
		}
		cmd, err := wait(wctx)
		cancel()
		if err != nil {
			if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
				r.emit(event.InputTimedOut{RequestID: id, TimeoutSeconds: timeout})
				r.emit(event.NodeExited{Node: "select", Error: "nobody picked; the next agent in order speaks"})
				return robin, event.SelectionFallback, nil
			}
			r.emit(event.NodeExited{Node: "select", Error: err.Error()})
			return 0, "", err
		}
		r.emit(event.InputProvided{RequestID: id, Text: cmd.Text})
		if strings.TrimSpace(cmd.Text) == "" {
			r.emit(event.NodeExited{Node: "select"})
			return -1, event.SelectionManual, nil
		}
		if idx, ok := g.pick(cmd.Text, true); ok {
			r.emit(event.NodeExited{Node: "select"})
			return idx, event.SelectionManual, nil
		}
		if attempt < 2 {
			r.systemMessage(fmt.Sprintf("%q is not an agent of this workflow. Answer one of: %s (or their numbers), or done.", truncateText(cmd.Text, 200), strings.Join(g.wf.Names(), ", ")))
		} else {
			r.systemMessage(fmt.Sprintf("%q is not an agent of this workflow either: %s speaks next, as the agents' order says.", truncateText(cmd.Text, 200), g.members[robin].Name))
		}
	}
	r.emit(event.NodeExited{Node: "select", Error: "no agent picked; the next agent in order speaks"})
	return robin, event.SelectionFallback, nil
}

// truncateText cuts s to n bytes (on a rune boundary), marking the cut.
func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}
