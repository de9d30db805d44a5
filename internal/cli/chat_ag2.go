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

	"github.com/coder/websocket"

	"github.com/agentwire/agentwire/generated/ag2api"
)

// ag2: ws://HOST/ws/{workflow}/{enterprise}/{chat}/{user}, the chat id
// being the thread. A turn is a user.input.submit without request_id and
// ends at chat.run_complete; a chat.input_request (a question, or an
// approval when its request id is a tool call's corr) is answered with
// user.input.submit naming it. Rejoining sends client.resume from 0, so
// the server replays the chat, then goes on live; if the socket drops the
// chat reconnects and resumes after the last seq it saw.
type ag2Chat struct {
	cfg  chatConfig
	sink sink

	wg       sync.WaitGroup // reconnections
	quit     chan struct{}  // closed by close: reconnections give up
	boundary chan struct{}  // closed at the first chat.resume_boundary

	mu       sync.Mutex
	ws       *wsClient
	closing  bool
	retries  int // reconnections since the last frame
	lastSeq  int
	calls    map[string]bool // corrs of tool calls: their input requests are approvals
	streamed bool            // chat.print frames since the last chat.text
	held     *ag2api.TextData
	replay   bool
	answered *question // answered, not yet acknowledged
}

func newAG2(cfg chatConfig, s sink) *ag2Chat {
	return &ag2Chat{cfg: cfg, sink: s, calls: map[string]bool{}, boundary: make(chan struct{}), quit: make(chan struct{})}
}

func (a *ag2Chat) url() string {
	p := "/ws/" + url.PathEscape(a.cfg.workflow) + "/" + url.PathEscape(a.cfg.enterprise) + "/" +
		url.PathEscape(a.cfg.thread) + "/" + url.PathEscape(a.cfg.user)
	return wsURL(a.cfg.base, p, nil)
}

func (a *ag2Chat) open(ctx context.Context) error {
	if err := a.dial(ctx); err != nil {
		return err
	}
	if a.cfg.rejoin {
		a.mu.Lock()
		a.replay = true
		a.mu.Unlock()
		zero := 0
		if err := a.write(ctx, ag2api.ClientResume{Type: ag2api.TypeClientResume, ChatID: &a.cfg.thread, LastClientIndex: &zero}); err != nil {
			return err
		}
		// The replay comes before anything is sent, so that it shows
		// whole, before the first new turn.
		select {
		case <-a.boundary:
		case <-a.ws.closed:
			return closeReason(a.ws.err)
		case <-time.After(30 * time.Second):
			return errors.New("no chat.resume_boundary came in 30 s")
		}
	}
	return nil
}

func (a *ag2Chat) dial(ctx context.Context) error {
	ws, err := dialWS(ctx, a.url(), a.cfg.token, a.frame, a.ended)
	if err != nil {
		return err
	}
	a.mu.Lock()
	closing := a.closing
	if !closing {
		a.ws = ws
	}
	a.mu.Unlock()
	if closing {
		ws.close()
		return errors.New("the chat is closing")
	}
	return nil
}

// ended runs when the socket stops. A socket that broke or that the server
// dropped (going away) is dialled again and resumed after the last seq
// seen; one closed for a reason (a policy violation) is not.
func (a *ag2Chat) ended(err error) {
	a.mu.Lock()
	closing, last := a.closing, a.lastSeq
	a.retries++
	retry := a.retries <= 3
	a.mu.Unlock()
	if closing {
		return
	}
	if st := websocket.CloseStatus(err); !retry || (st != -1 && st != websocket.StatusGoingAway) {
		a.sink.emit(item{kind: kClosed, err: closeReason(err)})
		return
	}
	a.sink.emit(item{kind: kNotice, text: fmt.Sprintf("the socket closed (%v); reconnecting to resume after seq %d", closeReason(err), last)})
	a.wg.Go(func() {
		ctx := context.Background()
		var derr error
		for _, wait := range ag2Backoff {
			select {
			case <-a.quit:
				return
			case <-time.After(wait):
			}
			if derr = a.dial(ctx); derr == nil {
				derr = a.write(ctx, ag2api.ClientResume{Type: ag2api.TypeClientResume, ChatID: &a.cfg.thread, LastClientIndex: &last})
				if derr == nil {
					return
				}
			}
		}
		a.sink.emit(item{kind: kClosed, err: fmt.Errorf("%v; reconnecting failed: %w", closeReason(err), derr)})
	})
}

// ag2Backoff are the waits before each attempt to reconnect: about half a
// minute in all, enough for a server to restart.
var ag2Backoff = []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 15 * time.Second}

func (a *ag2Chat) write(ctx context.Context, m ag2api.Inbound) error {
	b, err := ag2api.Encode(m)
	if err != nil {
		return err
	}
	a.mu.Lock()
	ws := a.ws
	a.mu.Unlock()
	return ws.write(ctx, b)
}

func (a *ag2Chat) send(ctx context.Context, text string) error {
	return a.write(ctx, ag2api.UserInputSubmit{Type: ag2api.TypeUserInputSubmit, ChatID: &a.cfg.thread, Text: text})
}

// ag2Answers maps the chat's words for an approval onto the server's.
var ag2Answers = map[string]string{
	"approve": "approve", "yes": "yes", "y": "y",
	"approve always": "approve always", "always": "approve always",
	"deny": "deny", "no": "no", "n": "n",
	"deny and stop": "deny and stop", "stop": "deny and stop",
}

func (a *ag2Chat) answer(ctx context.Context, q question, text string) error {
	if len(q.choices) > 0 {
		w, ok := ag2Answers[normalizeAnswer(text)]
		if !ok {
			return &answerError{fmt.Sprintf("%q is not an answer: %s (or yes, always, no, stop)", text, strings.Join(q.choices, ", "))}
		}
		text = w
	}
	if q.ui {
		data := json.RawMessage(text)
		if !json.Valid(data) {
			data, _ = json.Marshal(text)
		}
		return a.write(ctx, ag2api.InlineComponentResult{Type: ag2api.TypeInlineComponentResult, ChatID: &a.cfg.thread, Corr: q.id, Data: data})
	}
	a.mu.Lock()
	a.answered = &q
	a.mu.Unlock()
	return a.write(ctx, ag2api.UserInputSubmit{Type: ag2api.TypeUserInputSubmit, ChatID: &a.cfg.thread, RequestID: &q.id, Text: text})
}

// interrupt denies a pending approval with "deny and stop", which ends the
// run; the protocol has no other way to stop one.
func (a *ag2Chat) interrupt(ctx context.Context, q *question) (bool, error) {
	if q == nil || len(q.choices) == 0 {
		return false, nil
	}
	return true, a.answer(ctx, *q, "deny and stop")
}

func (a *ag2Chat) close() error {
	a.mu.Lock()
	a.closing = true
	ws := a.ws
	a.mu.Unlock()
	close(a.quit)
	if ws != nil {
		ws.close()
	}
	a.wg.Wait()
	// A reconnection may have replaced the socket.
	a.mu.Lock()
	again := a.ws
	a.mu.Unlock()
	if again != ws {
		again.close()
	}
	return nil
}

// flush shows a held chat.text.
func (a *ag2Chat) flush() {
	if t := a.held; t != nil {
		a.held = nil
		a.text(*t)
	}
}

func (a *ag2Chat) text(t ag2api.TextData) {
	switch t.Agent {
	case "user":
		a.sink.emit(item{kind: kUser, text: t.Content})
	case "system":
		a.sink.emit(item{kind: kNotice, text: t.Content})
	default:
		a.sink.emit(item{kind: kText, who: t.Agent, key: "text", text: t.Content})
		a.sink.emit(item{kind: kTextEnd})
	}
}

func (a *ag2Chat) seen(seq *int) {
	if seq != nil && *seq > a.lastSeq {
		a.lastSeq = *seq
	}
}

func (a *ag2Chat) frame(b []byte) {
	m, err := ag2api.DecodeOutbound(b)
	if err != nil {
		a.sink.emit(item{kind: kNotice, text: fmt.Sprintf("an ag2 frame could not be read: %v", err)})
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.retries = 0
	if t, ok := m.(ag2api.Text); ok && !a.streamed && t.Data.Agent != "user" {
		// A question's prompt comes as a chat.text just before its
		// chat.input_request, with the same seq: hold it to see.
		a.flush()
		d := t.Data
		a.held = &d
		a.seen(&t.Data.Seq)
		return
	}
	if q, ok := m.(ag2api.InputRequest); ok && a.held != nil && a.held.Seq == q.Data.Seq && a.held.Content == q.Data.Prompt {
		a.held = nil // the question shows the prompt
	}
	a.flush()
	switch m := m.(type) {
	case ag2api.SelectSpeaker:
		a.seen(&m.Data.Seq)
		a.sink.emit(item{kind: kTurnStart})
	case ag2api.Print:
		a.seen(&m.Data.Seq)
		key := ""
		if m.Data.Corr != nil {
			key = *m.Data.Corr
		}
		a.streamed = true
		a.sink.emit(item{kind: kText, who: m.Data.Agent, key: key, text: m.Data.Content})
	case ag2api.Text:
		a.seen(&m.Data.Seq)
		if m.Data.Agent == "user" {
			a.sink.emit(item{kind: kUser, text: m.Data.Content})
			break
		}
		a.streamed = false
		a.sink.emit(item{kind: kTextEnd})
	case ag2api.InputRequest:
		a.seen(&m.Data.Seq)
		d := m.Data
		q := question{id: d.RequestID, prompt: d.Prompt, secret: d.Password != nil && *d.Password}
		if a.calls[d.RequestID] {
			q.choices = []string{"approve", "approve always", "deny", "deny and stop"}
			if i := strings.Index(q.prompt, "\nAnswer "); i >= 0 {
				q.prompt = q.prompt[:i] // the choices say it
			}
			q.prompt = strings.ReplaceAll(q.prompt, "\n", " ")
		}
		a.sink.emit(item{kind: kAsk, q: q})
	case ag2api.InputAck:
		a.seen(&m.Data.Seq)
		if a.answered != nil && a.answered.id == m.Data.RequestID {
			a.answered = nil
		}
		a.sink.emit(item{kind: kAskDone, key: m.Data.RequestID})
	case ag2api.InputTimeout:
		a.seen(&m.Data.Seq)
		a.sink.emit(item{kind: kNotice, text: "nobody answered in time"})
		a.sink.emit(item{kind: kAskDone, key: m.Data.RequestID})
	case ag2api.ToolCall:
		a.seen(&m.Data.Seq)
		d := m.Data
		a.calls[d.Corr] = true
		if d.AwaitingResponse {
			a.sink.emit(item{kind: kAsk, q: question{id: d.Corr, ui: true,
				prompt: fmt.Sprintf("the agent shows a %s component: %s", d.ComponentType, oneLine(string(d.Payload), 300))}})
			break
		}
		a.sink.emit(item{kind: kToolCall, name: d.ToolName, text: string(d.Payload)})
	case ag2api.ToolResponse:
		a.seen(&m.Data.Seq)
		a.sink.emit(item{kind: kToolResult, name: m.Data.ToolName, text: m.Data.Content, ok: m.Data.Success})
		a.sink.emit(item{kind: kAskDone, key: m.Data.Corr})
	case ag2api.RunComplete:
		a.seen(&m.Data.Seq)
		if m.Data.Reason != "completed" {
			a.sink.emit(item{kind: kNotice, text: "the run ended: " + m.Data.Reason})
		}
		a.sink.emit(item{kind: kTurnEnd})
	case ag2api.ChatError:
		a.seen(m.Data.Seq)
		d := m.Data
		text := d.Message
		if d.ErrorCode != nil {
			text += " (" + *d.ErrorCode + ")"
		}
		a.sink.emit(item{kind: kError, text: text})
		if q := a.answered; q != nil {
			// The answer was refused: the question is still open.
			a.answered = nil
			a.sink.emit(item{kind: kAsk, q: *q})
		}
	case ag2api.ResumeBoundary:
		if a.replay {
			a.replay = false
			close(a.boundary)
		}
		n := 0
		if m.Data.ReplayedMessages != nil {
			n = *m.Data.ReplayedMessages
		}
		a.sink.emit(item{kind: kNotice, text: fmt.Sprintf("(end of the replay: %d frames)", n)})
	}
}
