package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/agentwire/agentwire/generated/loomapi"
)

// loom: ws://HOST/loom. A turn is a run request naming the thread
// (thread_id) and ends at its run_end or error. A tool_approval event is
// answered with tool_approval_response (approve, approve_always, deny,
// deny_stop), an input_requested custom event with input_response; Ctrl-C
// sends cancel. Rejoining lists the thread's messages (user_messages). A
// failed run makes the server close the socket: the next turn dials again.
type loomChat struct {
	cfg  chatConfig
	sink sink

	mu      sync.Mutex
	ws      *wsClient
	run     string        // the running run's id
	history chan struct{} // closed when the user_messages answer came
	histID  string
	closing bool
	failed  bool // the server closes the socket after a failed run
}

func newLoom(cfg chatConfig, s sink) *loomChat {
	return &loomChat{cfg: cfg, sink: s, history: make(chan struct{})}
}

func (l *loomChat) dial(ctx context.Context) error {
	var ws *wsClient
	ws, err := dialWS(ctx, wsURL(l.cfg.base, "/loom", nil), l.cfg.token, l.frame, func(err error) {
		l.mu.Lock()
		quiet := l.closing || l.failed
		l.mu.Unlock()
		if !quiet {
			l.sink.emit(item{kind: kClosed, err: closeReason(err)})
		}
	})
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.ws, l.failed = ws, false
	l.mu.Unlock()
	return nil
}

func (l *loomChat) open(ctx context.Context) error {
	if err := l.dial(ctx); err != nil {
		return err
	}
	if !l.cfg.rejoin {
		return nil
	}
	limit := 1000
	l.histID = "history-" + uuid.NewString()
	if err := l.write(ctx, loomapi.UserMessagesRequest{Type: loomapi.TypeUserMessages, ID: l.histID, ThreadID: l.cfg.thread, Limit: &limit}); err != nil {
		return err
	}
	select {
	case <-l.history:
		return nil
	case <-l.ws.closed:
		return closeReason(l.ws.err)
	case <-time.After(30 * time.Second):
		return errors.New("no answer to user_messages in 30 s")
	}
}

func (l *loomChat) write(ctx context.Context, m loomapi.Inbound) error {
	b, err := loomapi.Encode(m)
	if err != nil {
		return err
	}
	l.mu.Lock()
	ws := l.ws
	l.mu.Unlock()
	return ws.write(ctx, b)
}

func (l *loomChat) send(ctx context.Context, text string) error {
	l.mu.Lock()
	ws := l.ws
	l.mu.Unlock()
	if ws.done() {
		// The last run failed and the server closed the socket.
		ws.close()
		if err := l.dial(ctx); err != nil {
			return err
		}
	}
	id := "run-" + uuid.NewString()
	l.mu.Lock()
	l.run = id
	l.mu.Unlock()
	return l.write(ctx, loomapi.RunRequest{Type: loomapi.TypeRun, ID: &id, Message: text, Agent: l.cfg.agent, ThreadID: &l.cfg.thread})
}

// loomDecisions maps the chat's words for an approval onto decisions.
var loomDecisions = map[string]string{
	"approve": "approve", "yes": "approve", "y": "approve",
	"approve_always": "approve_always", "always": "approve_always", "approve always": "approve_always",
	"deny": "deny", "no": "deny", "n": "deny",
	"deny_stop": "deny_stop", "stop": "deny_stop", "deny and stop": "deny_stop",
}

func (l *loomChat) answer(ctx context.Context, q question, text string) error {
	if len(q.choices) == 0 {
		return l.write(ctx, loomapi.InputResponseRequest{Type: loomapi.TypeInputResponse, ID: q.ref, RequestID: q.id, Text: text, ThreadID: &l.cfg.thread})
	}
	d, ok := loomDecisions[normalizeAnswer(text)]
	if !ok {
		return &answerError{fmt.Sprintf("%q is not a decision: approve, approve_always, deny, deny_stop (or yes, always, no, stop)", text)}
	}
	return l.write(ctx, loomapi.ToolApprovalResponseRequest{Type: loomapi.TypeToolApprovalResponse, ID: q.ref, CallID: q.id, Decision: d, ThreadID: &l.cfg.thread})
}

// interrupt cancels the running run.
func (l *loomChat) interrupt(ctx context.Context, _ *question) (bool, error) {
	l.mu.Lock()
	run := l.run
	l.mu.Unlock()
	if run == "" {
		return false, nil
	}
	return true, l.write(ctx, loomapi.CancelRequest{Type: loomapi.TypeCancel, ID: run, ThreadID: &l.cfg.thread})
}

func (l *loomChat) close() error {
	l.mu.Lock()
	l.closing = true
	ws := l.ws
	l.mu.Unlock()
	if ws != nil {
		ws.close()
	}
	return nil
}

// custom is the value of a custom event: agentwire's notices.
type loomCustom struct {
	Kind      string `json:"kind"`
	RequestID string `json:"request_id"`
	CallID    string `json:"call_id"`
	Prompt    string `json:"prompt"`
	Secret    bool   `json:"secret"`
	Text      string `json:"text"`
	Decision  string `json:"decision"`
	Component string `json:"component"`
}

func (l *loomChat) frame(b []byte) {
	m, err := loomapi.DecodeOutbound(b)
	if err != nil {
		l.sink.emit(item{kind: kNotice, text: fmt.Sprintf("a loom frame could not be read: %v", err)})
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch m := m.(type) {
	case loomapi.RunStreamEventResponse:
		l.event(m.ID, m.Event.Value)
	case loomapi.RunEndResponse:
		if m.ID == l.run {
			l.run = ""
		}
		l.sink.emit(item{kind: kTurnEnd})
	case loomapi.ErrorResponse:
		l.sink.emit(item{kind: kError, text: m.Error})
		if m.ID != nil && *m.ID == l.run {
			l.run = ""
			// A failed run closes the socket; a cancelled or stopped
			// one does not, and a later dial finds it open.
			l.failed = true
			l.sink.emit(item{kind: kTurnEnd})
		} else if l.run != "" && m.ID == nil {
			// The run request itself was refused.
			l.run = ""
			l.sink.emit(item{kind: kTurnEnd})
		}
	case loomapi.UserMessagesResponse:
		if m.ID != l.histID {
			return
		}
		if len(m.Messages) == 0 {
			l.sink.emit(item{kind: kNotice, text: "thread " + l.cfg.thread + " has no messages yet"})
		} else {
			l.sink.emit(item{kind: kNotice, text: "the thread so far:"})
		}
		for i, msg := range m.Messages {
			switch msg.Role {
			case "user":
				l.sink.emit(item{kind: kUser, text: msg.Content})
			case "system":
				l.sink.emit(item{kind: kNotice, text: msg.Content})
			default:
				key := fmt.Sprint("history-", i)
				l.sink.emit(item{kind: kText, who: msg.Role, key: key, text: msg.Content})
				l.sink.emit(item{kind: kTextEnd, key: key})
			}
		}
		if len(m.Messages) > 0 {
			l.sink.emit(item{kind: kNotice, text: "(end of the history)"})
		}
		close(l.history)
	}
}

func (l *loomChat) event(run string, v loomapi.ProtocolEventValue) {
	switch e := v.(type) {
	case loomapi.MessageChunkEvent:
		l.sink.emit(item{kind: kText, who: "assistant", key: run + "/" + deref(e.NodeID), text: e.Content})
	case loomapi.ThoughtChunkEvent:
		l.sink.emit(item{kind: kText, who: "thinking", key: run + "/" + deref(e.NodeID), text: e.Content})
	case loomapi.ToolCallEvent:
		args, _ := json.Marshal(e.Arguments)
		l.sink.emit(item{kind: kToolCall, name: e.Name, text: string(args)})
	case loomapi.ToolApprovalEvent:
		args, _ := json.Marshal(e.Arguments)
		l.sink.emit(item{kind: kAsk, q: question{id: deref(e.CallID), ref: run,
			prompt:  "run " + e.Name + " " + oneLine(string(args), 300) + "?",
			choices: []string{"approve", "approve_always", "deny", "deny_stop"}}})
	case loomapi.ToolEndEvent:
		l.sink.emit(item{kind: kToolResult, name: e.Name, text: e.Result, ok: !e.IsError})
	case loomapi.CustomEvent:
		var c loomCustom
		if json.Unmarshal(e.Value, &c) != nil {
			return
		}
		switch c.Kind {
		case "input_requested":
			l.sink.emit(item{kind: kAsk, q: question{id: c.RequestID, ref: run, prompt: c.Prompt, secret: c.Secret}})
		case "input_provided", "input_timed_out", "ui_resolved":
			if c.Kind == "input_timed_out" {
				l.sink.emit(item{kind: kNotice, text: "nobody answered in time"})
			}
			l.sink.emit(item{kind: kAskDone, key: c.RequestID})
		case "tool_approval_resolved":
			l.sink.emit(item{kind: kAskDone, key: c.CallID})
		case "system_message":
			l.sink.emit(item{kind: kNotice, text: c.Text})
		case "ui_requested":
			l.sink.emit(item{kind: kNotice, text: "the agent shows a " + c.Component + " component, which Loom cannot show: answer it over AG2, or press Ctrl-C to cancel the run"})
		case "context_compacted":
			l.sink.emit(item{kind: kNotice, text: "the context was compacted"})
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
