package cli

import (
	"context"
	"fmt"
	"net/url"
	"sync"

	"github.com/agentwire/agentwire/generated/agentchatapi"
)

// agentchat: ws://HOST/ws?stream=chunks (the agent's text as it streams).
// The thread is the session_id of every chat frame. The protocol cannot
// answer approvals or questions (the server refuses such calls or says so
// in an agent_message), has no history to replay (a rejoined thread goes
// on from where it stood) and no frame that ends a turn: a turn counts as
// over when the socket has been quiet for --idle after the agent's text or
// an error, with no tool call waiting for its result.
type agentchat struct {
	cfg  chatConfig
	sink sink
	ws   *wsClient

	mu      sync.Mutex
	echo    []string // turns sent whose user_message echo is still to come
	running int      // tool calls without a result yet
}

func newAgentchat(cfg chatConfig, s sink) *agentchat { return &agentchat{cfg: cfg, sink: s} }

func (a *agentchat) open(ctx context.Context) error {
	ws, err := dialWS(ctx, wsURL(a.cfg.base, "/ws", url.Values{"stream": {"chunks"}}), a.cfg.token, a.frame,
		func(err error) { a.sink.emit(item{kind: kClosed, err: closeReason(err)}) })
	if err != nil {
		return err
	}
	a.ws = ws
	if a.cfg.rejoin {
		a.sink.emit(item{kind: kNotice, text: "agentchat replays no history: your turns continue thread " + a.cfg.thread})
	}
	return nil
}

func (a *agentchat) send(ctx context.Context, text string) error {
	a.mu.Lock()
	a.echo = append(a.echo, text)
	a.mu.Unlock()
	req := agentchatapi.ChatRequest{Type: agentchatapi.TypeChat, Message: text, SessionID: &a.cfg.thread}
	b, err := agentchatapi.Encode(req)
	if err != nil {
		return err
	}
	return a.ws.write(ctx, b)
}

func (a *agentchat) answer(context.Context, question, string) error {
	return &answerError{"agentchat cannot answer the agent's requests"}
}

func (a *agentchat) interrupt(context.Context, *question) (bool, error) { return false, nil }

func (a *agentchat) close() error {
	if a.ws != nil {
		a.ws.close()
	}
	return nil
}

func (a *agentchat) frame(b []byte) {
	m, err := agentchatapi.DecodeOutbound(b)
	if err != nil {
		a.sink.emit(item{kind: kNotice, text: fmt.Sprintf("an agentchat frame could not be read: %v", err)})
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	settles := false
	switch m := m.(type) {
	case agentchatapi.UserMessageEvent:
		if len(a.echo) > 0 && a.echo[0] == m.Message {
			a.echo = a.echo[1:]
			a.sink.emit(item{kind: kTurnStart})
			return
		}
		a.sink.emit(item{kind: kUser, text: m.Message})
	case agentchatapi.AgentMessageEvent:
		a.sink.emit(item{kind: kText, who: "assistant", key: "agentchat", text: m.Message})
		settles = true
	case agentchatapi.AgentThinkingEvent:
		a.sink.emit(item{kind: kThinking, text: m.Reasoning})
	case agentchatapi.ToolCallEvent:
		a.running++
		a.sink.emit(item{kind: kToolCall, name: m.ToolName, text: m.ToolArgs})
	case agentchatapi.ToolResultEvent:
		if a.running > 0 {
			a.running--
		}
		a.sink.emit(item{kind: kToolResult, name: m.ToolName, text: m.Result, ok: m.Success})
	case agentchatapi.ErrorEvent:
		a.sink.emit(item{kind: kError, text: m.Error})
		settles = true
	}
	if settles && a.running == 0 {
		a.sink.emit(item{kind: kMaybeEnd})
	}
}
