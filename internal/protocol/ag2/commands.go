package ag2

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"

	"github.com/agentwire/agentwire/generated/ag2api"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/identity"
	"github.com/agentwire/agentwire/internal/protocol"
	"github.com/agentwire/agentwire/internal/runs"
	"github.com/agentwire/agentwire/internal/wire"
)

// handle decodes and dispatches one client frame, after the rate limits.
func (s *session) handle(ctx context.Context, b []byte) {
	if !s.limiter.Allow() || !s.h.userLimiter(identity.FromContext(ctx).ID, s.ent, s.user).Allow() {
		s.send(frame{msg: chatError(s.chat, 0, codeRate, "Too many messages; this one was dropped. Wait a moment and send it again",
			map[string]any{"rate_per_second": float64(s.h.rate), "burst": s.h.burst}, true)}, false)
		return
	}
	m, err := ag2api.Decode(b)
	if _, resume := m.(ag2api.ClientResume); !resume {
		s.start.Do(func() { close(s.started) })
		// client.resume goes to the follow, which serves it once the
		// history is projected; every other message is answered against
		// the projection.
		if err := s.projected(ctx); err != nil {
			return
		}
	}
	if err == nil {
		err = ag2api.Dispatch(ctx, s, m)
	}
	if err != nil {
		s.sendErr(err, "handle the message")
	}
}

// checkChat refuses a message that names another chat than the socket's.
func (s *session) checkChat(typ string, id *string) error {
	if id == nil {
		return nil
	}
	c, err := protocol.CanonicalThread(*id)
	if err != nil || c != s.chat {
		return &protocol.Error{Code: protocol.CodeInvalid, Type: typ, Path: "/chat_id",
			Message: fmt.Sprintf("chat_id %q is not this socket's chat (%s)", *id, s.chat)}
	}
	return nil
}

// HandleUserInputSubmit answers the input or approval request request_id
// (or input_request_id) names, or, without one, the chat's pending request
// (unless --ag2-text-turns), or else posts a new user turn.
func (s *session) HandleUserInputSubmit(ctx context.Context, m ag2api.UserInputSubmit) error {
	if err := s.checkChat(m.Type, m.ChatID); err != nil {
		return err
	}
	id, err := requestIDOf(m)
	if err != nil {
		return err
	}
	if id == "" && !s.h.rest.textTurns {
		id, _, _ = s.proj.latestPending()
	}
	if id == "" {
		if err := protocol.CheckText(m.Text); err != nil {
			return &protocol.Error{Code: protocol.CodeInvalid, Type: m.Type, Path: "/text", Message: "text is empty: there is nothing to send"}
		}
		if err := s.h.claimScope(ctx, s.chat, s.ent, s.user); err != nil {
			return err
		}
		return s.proj.posting(func() (string, error) {
			p, err := s.h.core.Post(ctx, s.chat, runs.Input{Text: m.Text, Interactive: true,
				Options: event.RunOptions{Workflow: s.workflow}})
			return p.MessageID, err
		})
	}
	cmd, err := answerCommand(m.Type, id, m.Text, s.proj.pendingKind(id))
	if err != nil {
		return err
	}
	return s.answer(ctx, cmd)
}

// answer resolves a pending request; an unknown one is UNKNOWN_REQUEST.
func (s *session) answer(ctx context.Context, cmd event.Command) error {
	err := s.h.core.Resolve(ctx, s.chat, cmd)
	if err != nil && protocol.AsError(err).Code == protocol.CodeUnknownRequest {
		return &protocol.Error{Code: protocol.CodeUnknownRequest, Cause: err,
			Message: fmt.Sprintf("No pending request %q: it was never asked, is answered already, or timed out", cmd.ID)}
	}
	return err
}

// decisions are the answers an approval request takes, lower-cased.
var decisions = map[string]event.Decision{
	"approve": event.DecisionApprove, "yes": event.DecisionApprove, "y": event.DecisionApprove,
	"approve always": event.DecisionApproveAlways,
	"deny":           event.DecisionDenyContinue, "no": event.DecisionDenyContinue, "n": event.DecisionDenyContinue,
	"deny and stop": event.DecisionDenyStop,
}

// decisionText is how a replay shows a decision: the answer that gives
// it.
var decisionText = map[event.Decision]string{
	event.DecisionApprove: "approve", event.DecisionApproveAlways: "approve always",
	event.DecisionDenyContinue: "deny", event.DecisionDenyStop: "deny and stop",
}

func parseDecision(text string) (event.Decision, bool) {
	d, ok := decisions[strings.Join(strings.Fields(strings.ToLower(text)), " ")]
	return d, ok
}

// HandleInlineComponentResult answers the UI request corr names.
func (s *session) HandleInlineComponentResult(ctx context.Context, m ag2api.InlineComponentResult) error {
	if err := s.checkChat(m.Type, m.ChatID); err != nil {
		return err
	}
	data := m.Data
	if len(data) == 0 {
		data = json.RawMessage(`null`)
	}
	return s.answer(ctx, event.Command{Kind: event.CommandUI, ID: m.Corr, Data: data})
}

// HandleArtifactPatch applies a JSON Patch to the artifact corr names and
// records the patched payload in the chat.
func (s *session) HandleArtifactPatch(ctx context.Context, m ag2api.ArtifactPatch) error {
	if err := s.checkChat(m.Type, m.ChatID); err != nil {
		return err
	}
	payload, ok := s.proj.artifactPayload(m.Corr)
	if !ok {
		return &protocol.Error{Code: protocol.CodeUnknownRequest,
			Message: fmt.Sprintf("No UI component %q to patch", m.Corr)}
	}
	doc := []byte(payload)
	for i, op := range m.Patch {
		p, err := jsonpatch.DecodePatch(append(append([]byte{'['}, op...), ']'))
		if err == nil {
			doc, err = p.Apply(doc)
		}
		if err != nil {
			return &patchError{index: i, op: op, err: err}
		}
	}
	patch, _ := json.Marshal(m.Patch)
	var compact bytes.Buffer
	if err := json.Compact(&compact, doc); err != nil {
		return protocol.Internal(err)
	}
	if err := s.h.claimScope(ctx, s.chat, s.ent, s.user); err != nil {
		return err
	}
	_, err := s.h.core.Record(ctx, s.chat, event.UIPatched{RequestID: m.Corr, Patch: patch, Payload: compact.Bytes()})
	return err
}

// patchError is a JSON Patch operation that does not apply.
type patchError struct {
	index int
	op    json.RawMessage
	err   error
}

func (e *patchError) Error() string {
	return fmt.Sprintf("patch operation %d does not apply: %v; the artifact is unchanged", e.index, e.err)
}

// resumeError is a client.resume the server cannot honour.
type resumeError struct{ err error }

func (e *resumeError) Error() string { return "the resume names another chat: " + e.err.Error() }

func (e *resumeError) Unwrap() error { return e.err }

// HandleClientResume asks the follow goroutine for a replay.
func (s *session) HandleClientResume(ctx context.Context, m ag2api.ClientResume) error {
	if err := s.checkChat(m.Type, m.ChatID); err != nil {
		return &resumeError{err: err}
	}
	n := int64(0)
	if m.LastClientIndex != nil {
		n = int64(*m.LastClientIndex)
	}
	select {
	case s.resume <- n:
	case <-ctx.Done():
	case <-s.c.Done():
	}
	return nil
}

// sendErr sends the chat.error of err: the protocol's one mapping of the
// error vocabulary.
func (s *session) sendErr(err error, what string) {
	var pe *patchError
	if errors.As(err, &pe) {
		s.send(frame{msg: chatError(s.chat, 0, codeSchema, pe.Error(),
			map[string]any{"field": fmt.Sprintf("/patch/%d", pe.index), "op": pe.op, "reason": pe.err.Error()}, true)}, false)
		return
	}
	var re *resumeError
	if errors.As(err, &re) {
		s.send(frame{msg: chatError(s.chat, 0, codeResume, protocol.AsError(err).Message+"; nothing was replayed",
			map[string]any{"field": "chat_id"}, true)}, false)
		return
	}
	perr := protocol.AsError(err)
	code, msg, details := "", perr.Message, map[string]any{}
	switch perr.Code {
	case protocol.CodeInvalid, protocol.CodeUnknownType:
		code = codeSchema
		field := strings.TrimPrefix(perr.Path, "/")
		if perr.Code == protocol.CodeUnknownType {
			field = "type"
			msg = fmt.Sprintf("Unknown message type %q", perr.Type)
		}
		if we, ok := wire.AsError(err); ok {
			msg = "Invalid message: " + we.Error()
			if we.Kind == wire.KindSyntax {
				msg = "Invalid JSON: " + we.Error()
			}
			details["reason"] = we.Reason
		}
		if field == "" && perr.Code == protocol.CodeInvalid {
			field = "(frame)"
		}
		details["field"] = field
		if perr.Type != "" {
			details["type"] = perr.Type
		}
		if perr.Type == ag2api.TypeClientResume {
			// A corrupt resume: nothing was replayed.
			code = codeResume
		}
	case protocol.CodeUnknownRequest:
		code = codeUnknownReq
	case protocol.CodeRateLimited:
		code = codeRate
	case protocol.CodeNotFound, protocol.CodeForbidden:
		code = codeSchema
	case protocol.CodeBusy:
		code = codeTransport
	case protocol.CodeUnavailable:
		code, msg = codeTransport, "The server is shutting down or cannot reach its store; try again shortly"
	case protocol.CodeInternal:
		s.log.L().Error("ag2: could not "+what, "chat", s.chat, "err", err)
		code, msg = codePersistence, "Could not "+what+": internal error"
	}
	if len(details) == 0 {
		details = nil
	}
	s.send(frame{msg: chatError(s.chat, 0, code, msg, details, true)}, false)
}
