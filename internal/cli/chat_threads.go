package cli

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-faster/jx"
	"github.com/google/uuid"

	"github.com/agentwire/agentwire/generated/threadsapi"
	"github.com/agentwire/agentwire/internal/protocol/threads"
)

// threads: POST /api/v1/threads/{id} per turn, whose answer streams the
// run's events; GET /api/v1/threads/{id} shows a rejoined thread's history.
// A stream that breaks before its done or error (a server restart) is
// resumed from its last event id (GET …/events with Last-Event-ID), never
// by posting again. The protocol cannot answer approvals or questions: the
// server refuses such calls, and the refusal shows as a failed result.
type threadsChat struct {
	cfg    chatConfig
	sink   sink
	client *threads.Client
	id     uuid.UUID

	ctx    context.Context // ends at close: the streams' bound
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	names map[string]string // tool names by call id, for the results
}

func newThreads(cfg chatConfig, s sink) (*threadsChat, error) {
	hc := &http.Client{Transport: bearerTransport{token: cfg.token, next: http.DefaultTransport}}
	c, err := threads.NewClient(cfg.base.String(), hc)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &threadsChat{cfg: cfg, sink: s, client: c, id: uuid.MustParse(cfg.thread), ctx: ctx, cancel: cancel, names: map[string]string{}}, nil
}

// bearerTransport adds the credential to every request.
type bearerTransport struct {
	token string
	next  http.RoundTripper
}

func (t bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.token == "" {
		return t.next.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+t.token)
	return t.next.RoundTrip(r)
}

func (t *threadsChat) open(ctx context.Context) error {
	if !t.cfg.rejoin {
		// Nothing to show; check that the server answers.
		_, err := t.client.History(ctx, t.id)
		var ae *threads.APIError
		if err != nil && !(errors.As(err, &ae) && ae.StatusCode == http.StatusNotFound) {
			return err
		}
		return nil
	}
	h, err := t.client.History(ctx, t.id)
	var ae *threads.APIError
	if errors.As(err, &ae) && ae.StatusCode == http.StatusNotFound {
		t.sink.emit(item{kind: kNotice, text: "thread " + t.cfg.thread + " has no messages yet"})
		return nil
	}
	if err != nil {
		return err
	}
	t.sink.emit(item{kind: kNotice, text: "the thread so far:"})
	for _, m := range h.Messages {
		switch c := m.Content; c.Type {
		case threadsapi.UserContentMessageContent:
			t.sink.emit(item{kind: kUser, text: c.UserContent.Text})
		case threadsapi.AgentContentMessageContent:
			t.sink.emit(item{kind: kText, who: "assistant", key: m.MessageID, text: c.AgentContent.Text})
			t.sink.emit(item{kind: kTextEnd, key: m.MessageID})
		case threadsapi.ToolCallContentMessageContent:
			t.call(c.ToolCallContent.ToolCallID, c.ToolCallContent.ToolName, c.ToolCallContent.Arguments)
		case threadsapi.ToolResultContentMessageContent:
			r := c.ToolResultContent
			t.result(r.ToolCallID, r.ToolResultID, r.Result)
		}
	}
	t.sink.emit(item{kind: kNotice, text: "(end of the history)"})
	return nil
}

func (t *threadsChat) send(ctx context.Context, text string) error {
	s, err := t.client.SendMessage(t.ctx, t.id, text)
	if err != nil {
		var ae *threads.APIError
		if errors.As(err, &ae) {
			// The server refused the turn: its message, and no turn.
			t.sink.emit(item{kind: kError, text: ae.Message})
			t.sink.emit(item{kind: kTurnEnd})
			return nil
		}
		return err
	}
	t.wg.Go(func() { t.follow(s) })
	return nil
}

// follow shows a turn's stream until its done or error, resuming it when
// it breaks first.
func (t *threadsChat) follow(s *threads.Stream) {
	t.sink.emit(item{kind: kTurnStart})
	for tries := 0; ; {
		err := t.read(s)
		last := s.LastEventID()
		s.Close()
		if err == nil {
			t.sink.emit(item{kind: kTurnEnd})
			return
		}
		if t.ctx.Err() != nil {
			return
		}
		if tries++; tries > 5 {
			t.sink.emit(item{kind: kClosed, err: err})
			return
		}
		t.sink.emit(item{kind: kNotice, text: "the stream broke (" + err.Error() + "); resuming after event " + last})
		for {
			select {
			case <-t.ctx.Done():
				return
			case <-time.After(time.Duration(tries) * time.Second):
			}
			s, err = t.client.Resume(t.ctx, t.id, last)
			if err == nil {
				break
			}
			if tries++; tries > 5 {
				t.sink.emit(item{kind: kClosed, err: err})
				return
			}
		}
	}
}

// read shows a stream's events; nil at its done or error.
func (t *threadsChat) read(s *threads.Stream) error {
	for {
		e, err := s.Next(t.ctx)
		if errors.Is(err, io.EOF) {
			return errors.New("the server closed the stream")
		}
		if err != nil {
			return err
		}
		switch e.Type {
		case threadsapi.AgentTextSSEStreamEvent:
			d := e.AgentTextSSE.Data
			t.sink.emit(item{kind: kText, who: "assistant", key: d.MessageID, text: d.Chunk})
		case threadsapi.ToolCallSSEStreamEvent:
			d := e.ToolCallSSE.Data
			t.call(d.ToolCallID, d.ToolName, d.Arguments)
		case threadsapi.ToolResultSSEStreamEvent:
			d := e.ToolResultSSE.Data
			t.result(d.ToolCallID, d.ToolResultID, d.Result)
		case threadsapi.DoneSSEStreamEvent:
			return nil
		case threadsapi.ErrorSSEStreamEvent:
			t.sink.emit(item{kind: kError, text: e.ErrorSSE.Data.Error})
			return nil
		}
	}
}

func (t *threadsChat) call(id, name string, args threadsapi.JSONObject) {
	t.mu.Lock()
	t.names[id] = name
	t.mu.Unlock()
	t.sink.emit(item{kind: kToolCall, name: name, text: jsonObject(args)})
}

// result shows a tool result: an error- id is a failure, whose result is
// {"error", "tool"}; a success's is the output, or {"output": text}.
func (t *threadsChat) result(callID, id string, r threadsapi.JSONObject) {
	t.mu.Lock()
	name := t.names[callID]
	delete(t.names, callID)
	t.mu.Unlock()
	if strings.HasPrefix(id, "error-") {
		var msg string
		_ = json.Unmarshal(r["error"], &msg)
		if name == "" {
			_ = json.Unmarshal(r["tool"], &name)
		}
		t.sink.emit(item{kind: kToolResult, name: name, text: msg})
		return
	}
	text := jsonObject(r)
	if out, ok := r["output"]; ok && len(r) == 1 {
		var s string
		if json.Unmarshal(out, &s) == nil {
			text = s
		}
	}
	t.sink.emit(item{kind: kToolResult, name: name, text: text, ok: true})
}

// jsonObject writes an object of raw JSON values, its keys sorted.
func jsonObject(o threadsapi.JSONObject) string {
	keys := make([]string, 0, len(o))
	for k := range o {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		b.Write(jx.Raw(o[k]))
	}
	b.WriteByte('}')
	return b.String()
}

func (t *threadsChat) answer(context.Context, question, string) error {
	return &answerError{"the threads protocol cannot answer the agent's requests"}
}

func (t *threadsChat) interrupt(context.Context, *question) (bool, error) { return false, nil }

func (t *threadsChat) close() error {
	t.cancel()
	t.wg.Wait()
	return nil
}
