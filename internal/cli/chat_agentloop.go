package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/agentwire/agentwire/generated/agentloopapi"
)

// agentloop: ws://HOST/agentloop?thread_id=ID. A turn is a user_input and
// runs from loading_state true to loading_state false. An approval_request
// is answered with approval_response (yes, always, no-continue, no-exit,
// explain); a question (an assistant message ending with the server's
// "(Your next message answers this question.)") is answered by the next
// user_input. Joining a thread makes the server send its conversation so
// far, which shows as it comes.
type agentloopChat struct {
	cfg  chatConfig
	sink sink
	ws   *wsClient

	frames chan struct{} // a signal per frame, while open waits for a replay

	mu      sync.Mutex
	loading bool
	names   map[string]string // function names by call id
}

func newAgentloop(cfg chatConfig, s sink) *agentloopChat {
	return &agentloopChat{cfg: cfg, sink: s, names: map[string]string{}, frames: make(chan struct{}, 1)}
}

func (a *agentloopChat) open(ctx context.Context) error {
	ws, err := dialWS(ctx, wsURL(a.cfg.base, "/agentloop", url.Values{"thread_id": {a.cfg.thread}}), a.cfg.token, a.frame,
		func(err error) { a.sink.emit(item{kind: kClosed, err: closeReason(err)}) })
	if err != nil {
		return err
	}
	a.ws = ws
	if !a.cfg.rejoin {
		return nil
	}
	// The server sends a joined thread's conversation so far at once,
	// with nothing to mark its end: it is over when the socket has been
	// quiet a moment (or a run it shows is still streaming).
	first := time.After(30 * time.Second)
	for quiet, end := time.Duration(0), time.Now().Add(10*time.Second); time.Now().Before(end); {
		var wait <-chan time.Time
		if quiet > 0 {
			wait = time.After(quiet)
		}
		select {
		case <-a.frames:
			quiet = replayQuiet
		case <-wait:
			return nil
		case <-first:
			return errors.New("the server sent nothing in 30 s")
		case <-ws.closed:
			return closeReason(ws.err)
		}
	}
	return nil
}

// replayQuiet is the silence that ends a joined thread's replay.
const replayQuiet = 300 * time.Millisecond

func (a *agentloopChat) write(ctx context.Context, m agentloopapi.Inbound) error {
	b, err := agentloopapi.Encode(m)
	if err != nil {
		return err
	}
	return a.ws.write(ctx, b)
}

func (a *agentloopChat) send(ctx context.Context, text string) error {
	content, _ := json.Marshal([]agentloopapi.ContentPart{{Type: "input_text", Text: text}})
	typ, role := "message", "user"
	return a.write(ctx, agentloopapi.UserInputMessage{ID: uuid.NewString(), Type: agentloopapi.TypeUserInput,
		Payload: agentloopapi.UserInputMessagePayload{Input: []agentloopapi.ResponseInputItem{{Type: &typ, Role: &role, Content: content}}}})
}

// agentloopReviews maps the chat's words for an approval onto reviews.
var agentloopReviews = map[string]string{
	"yes": "yes", "y": "yes", "approve": "yes",
	"always": "always", "a": "always",
	"no-continue": "no-continue", "no": "no-continue", "n": "no-continue", "deny": "no-continue",
	"no-exit": "no-exit", "stop": "no-exit",
	"explain": "explain", "e": "explain",
}

func (a *agentloopChat) answer(ctx context.Context, q question, text string) error {
	if len(q.choices) == 0 {
		return a.send(ctx, text)
	}
	review, ok := agentloopReviews[normalizeAnswer(text)]
	if !ok {
		return &answerError{fmt.Sprintf("%q is not a review: %s (or y, n, stop)", text, strings.Join(q.choices, ", "))}
	}
	return a.write(ctx, agentloopapi.ApprovalResponseMessage{ID: uuid.NewString(), Type: agentloopapi.TypeApprovalResponse,
		Payload: agentloopapi.ApprovalResponseMessagePayload{Review: review}})
}

// interrupt answers a pending approval with no-exit, which ends the turn;
// the protocol has no other way to stop one.
func (a *agentloopChat) interrupt(ctx context.Context, q *question) (bool, error) {
	if q == nil || len(q.choices) == 0 {
		return false, nil
	}
	return true, a.answer(ctx, *q, "no-exit")
}

func (a *agentloopChat) close() error {
	if a.ws != nil {
		a.ws.close()
	}
	return nil
}

// questionMark ends an assistant message that asks the user something.
const questionMark = "(Your next message answers this question.)"

func partsText(ps []agentloopapi.ContentPart) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(p.Text)
	}
	return b.String()
}

// callOutput reads the documented {"output", "metadata": {"exit_code"}}.
func callOutput(s string) (string, bool) {
	var o struct {
		Output   string `json:"output"`
		Metadata struct {
			ExitCode int `json:"exit_code"`
		} `json:"metadata"`
	}
	if json.Unmarshal([]byte(s), &o) != nil {
		return s, true
	}
	return o.Output, o.Metadata.ExitCode == 0
}

func (a *agentloopChat) frame(b []byte) {
	m, err := agentloopapi.DecodeOutbound(b)
	if err != nil {
		a.sink.emit(item{kind: kNotice, text: fmt.Sprintf("an agentloop frame could not be read: %v", err)})
		return
	}
	select {
	case a.frames <- struct{}{}:
	default:
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	switch m := m.(type) {
	case agentloopapi.LoadingStateMessage:
		a.loading = m.Payload.Loading
		if a.loading {
			a.sink.emit(item{kind: kTurnStart})
		} else {
			a.sink.emit(item{kind: kTurnEnd})
		}
	case agentloopapi.ResponseItemMessage:
		a.item(m.Payload.Value)
	case agentloopapi.ApprovalRequestMessage:
		p := m.Payload
		what := "run `" + strings.Join(p.Command, " ") + "`?"
		if p.ApplyPatch != nil {
			what = "apply this patch?\n" + p.ApplyPatch.Patch
		}
		a.sink.emit(item{kind: kAsk, q: question{id: m.ID, prompt: what, choices: []string{"yes", "always", "no-continue", "no-exit", "explain"}}})
	case agentloopapi.ErrorMessage:
		a.sink.emit(item{kind: kError, text: m.Payload.Message})
		if !a.loading {
			// Refused input: no turn started.
			a.sink.emit(item{kind: kTurnEnd})
		}
	case agentloopapi.ContextCompactedMessage:
		a.sink.emit(item{kind: kNotice, text: fmt.Sprintf("the context was compacted: %d → %d tokens", m.Payload.OldTokenCount, m.Payload.NewTokenCount)})
	}
}

func (a *agentloopChat) item(v agentloopapi.ResponseItemValue) {
	switch v := v.(type) {
	case agentloopapi.MessageItem:
		text := partsText(v.Content)
		switch v.Role {
		case "user":
			a.sink.emit(item{kind: kUser, text: text})
		case "system":
			a.sink.emit(item{kind: kNotice, text: text})
		default:
			if q, ok := strings.CutSuffix(strings.TrimSpace(text), questionMark); ok {
				a.sink.emit(item{kind: kAsk, q: question{id: v.ID, prompt: strings.TrimSpace(q)}})
				return
			}
			a.sink.emit(item{kind: kText, who: v.Role, key: v.ID, text: text})
			a.sink.emit(item{kind: kTextEnd, key: v.ID})
		}
	case agentloopapi.ReasoningItem:
		a.sink.emit(item{kind: kThinking, text: partsText(v.Content)})
	case agentloopapi.FunctionCallItem:
		a.names[v.CallID] = v.Name
		a.sink.emit(item{kind: kToolCall, name: v.Name, text: v.Arguments})
	case agentloopapi.FunctionCallOutputItem:
		out, ok := callOutput(v.Output)
		name := a.names[v.CallID]
		delete(a.names, v.CallID)
		a.sink.emit(item{kind: kToolResult, name: name, text: out, ok: ok})
	case agentloopapi.LocalShellCallItem:
		a.sink.emit(item{kind: kToolCall, name: "shell", text: strings.Join(v.Action.Command, " ")})
	case agentloopapi.LocalShellCallOutputItem:
		out, ok := callOutput(v.Output)
		a.sink.emit(item{kind: kToolResult, name: "shell", text: out, ok: ok})
	}
}
