package loom

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/agentwire/agentwire/generated/loomapi"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/protocol"
	"github.com/agentwire/agentwire/internal/tools"
	"github.com/agentwire/agentwire/internal/tools/sandbox"
)

// HandleRunRequest checks a run request and queues it for the worker.
func (s *session) HandleRunRequest(_ context.Context, m loomapi.RunRequest) error {
	j := runJob{id: deref(m.ID), text: m.Message, agent: m.Agent,
		opts: event.RunOptions{Strategy: m.Agent, Verbose: deref(m.Verbose)}}
	chosen := j.id == "" // the server chooses the run id
	if chosen {
		j.id = "run-" + event.NewID()
	}
	if m.Agent == "got" && deref(m.GotAdaptive) {
		j.opts.Strategy = "got_adaptive"
	}
	fail := func(err error) error {
		s.send(errorFrame(j.id, s.h.message(err, "start the run")))
		return nil
	}
	if err := protocol.CheckText(m.Message); err != nil {
		return fail(err)
	}
	if t := deref(m.ThreadID); t != "" {
		thread, err := protocol.CanonicalThread(t)
		if err != nil {
			return fail(err)
		}
		j.thread = thread
	} else if chosen {
		// A new thread named by the run id: session_id is then the run id,
		// as the original server sent, and continues the thread.
		j.thread = j.id
	} else {
		j.thread = "run-" + event.NewID()
	}
	if folder := deref(m.WorkingFolder); folder != "" {
		if err := s.h.checkFolder(folder); err != nil {
			return fail(err)
		}
		j.opts.Folder = folder
	}
	if !s.queue(j) {
		return fail(protocol.Errorf(protocol.CodeBusy, "%d runs already wait on this socket; wait for a run_end", maxQueuedRuns))
	}
	return nil
}

// HandleToolsListRequest lists the tools a run gets.
func (s *session) HandleToolsListRequest(_ context.Context, m loomapi.ToolsListRequest) error {
	if folder := deref(m.WorkingFolder); folder != "" {
		if err := s.h.checkFolder(folder); err != nil {
			return err
		}
	}
	list := make([]loomapi.ToolSpec, len(s.h.specs))
	for i, t := range s.h.specs {
		list[i] = toolSpec(t)
	}
	s.send(loomapi.NewToolsListResponse(m.ID, list))
	return nil
}

// HandleToolShowRequest shows one tool, as JSON or YAML.
func (s *session) HandleToolShowRequest(_ context.Context, m loomapi.ToolShowRequest) error {
	if folder := deref(m.WorkingFolder); folder != "" {
		if err := s.h.checkFolder(folder); err != nil {
			return err
		}
	}
	i := slices.IndexFunc(s.h.specs, func(t tools.Spec) bool { return t.Name == m.Name })
	if i < 0 {
		// The original server's text, which its clients match on.
		return protocol.Errorf(protocol.CodeNotFound, "tool not found: %s", m.Name)
	}
	spec := toolSpec(s.h.specs[i])
	out := loomapi.NewToolShowResponse(m.ID)
	switch deref(m.Output) {
	case "", "yaml":
		y, err := toolYAML(spec)
		if err != nil {
			return protocol.Internal(err)
		}
		out.ToolYaml = &y
	case "json":
		out.Tool = &spec
	default:
		return &protocol.Error{Code: protocol.CodeInvalid, Path: "/output", Type: loomapi.TypeToolShow,
			Message: fmt.Sprintf("/output: must be \"yaml\" or \"json\", not %q", deref(m.Output))}
	}
	s.send(out)
	return nil
}

// HandleUserMessagesRequest answers with a page of the thread's messages:
// the newest limit ones below before, oldest first.
func (s *session) HandleUserMessagesRequest(ctx context.Context, m loomapi.UserMessagesRequest) error {
	thread, err := protocol.CanonicalThread(m.ThreadID)
	if err != nil {
		return err
	}
	limit := defaultLimit
	if m.Limit != nil {
		limit = min(*m.Limit, maxLimit)
	}
	hist, err := s.h.core.History(ctx, thread)
	if err != nil && protocol.AsError(err).Code != protocol.CodeNotFound {
		return err
	}
	all := listed(hist)
	end := len(all)
	if m.Before != nil {
		end = 0
		for end < len(all) && *all[end].Seq < *m.Before {
			end++
		}
	}
	start := max(end-limit, 0)
	out := loomapi.NewUserMessagesResponse(m.ID, thread, slices.Clip(all[start:end]))
	if out.Messages == nil {
		out.Messages = []loomapi.UserMessageItem{}
	}
	out.HasMore = new(start > 0)
	s.send(out)
	return nil
}

// listed is a thread's messages as user_messages lists them: the user's
// messages and the complete assistant replies, with their seq.
func listed(hist []event.Event) []loomapi.UserMessageItem {
	var out []loomapi.UserMessageItem
	for _, e := range hist {
		switch v := e.Payload.(type) {
		case event.MessageUser:
			if strings.TrimSpace(v.Text) != "" {
				out = append(out, loomapi.UserMessageItem{Role: "user", Content: v.Text, Seq: new(int(e.Seq))})
			}
		case event.MessageCompleted:
			if v.Role == event.RoleAssistant && v.Purpose == "" && strings.TrimSpace(v.Text) != "" {
				out = append(out, loomapi.UserMessageItem{Role: "assistant", Content: v.Text, Seq: new(int(e.Seq))})
			}
		}
	}
	return out
}

// HandlePingRequest answers with pong.
func (s *session) HandlePingRequest(_ context.Context, m loomapi.PingRequest) error {
	s.send(loomapi.NewPongResponse(m.ID))
	return nil
}

// HandleToolApprovalResponseRequest answers a tool call that waits for
// approval; the run's stream shows what follows.
func (s *session) HandleToolApprovalResponseRequest(ctx context.Context, m loomapi.ToolApprovalResponseRequest) error {
	ref, err := s.lookup(m.ID, m.ThreadID)
	if err != nil {
		return err
	}
	d := decisions[m.Decision]
	cmd := event.Command{Kind: event.CommandApprove, Run: ref.run, ID: m.CallID, Decision: d}
	if d == event.DecisionDenyContinue || d == event.DecisionDenyStop {
		cmd.Text = deref(m.Message)
	}
	err = s.h.core.Resolve(ctx, ref.thread, cmd)
	if err != nil && protocol.AsError(err).Code == protocol.CodeUnknownRequest {
		return protocol.Errorf(protocol.CodeUnknownRequest,
			"no tool call %q of run %q waits for approval: it was never asked for, or it was answered already", m.CallID, m.ID)
	}
	return err
}

// HandleInputResponseRequest answers a question the agent asked (its
// ask_user tool); the run's stream shows what follows.
func (s *session) HandleInputResponseRequest(ctx context.Context, m loomapi.InputResponseRequest) error {
	ref, err := s.lookup(m.ID, m.ThreadID)
	if err != nil {
		return err
	}
	err = s.h.core.Resolve(ctx, ref.thread, event.Command{Kind: event.CommandInput, Run: ref.run, ID: m.RequestID, Text: m.Text})
	if err != nil && protocol.AsError(err).Code == protocol.CodeUnknownRequest {
		return protocol.Errorf(protocol.CodeUnknownRequest,
			"no question %q of run %q waits for an answer: it was never asked, it was answered already, or it timed out", m.RequestID, m.ID)
	}
	return err
}

// HandleCancelRequest cancels a running run; its stream ends with an
// error "cancelled".
func (s *session) HandleCancelRequest(ctx context.Context, m loomapi.CancelRequest) error {
	ref, err := s.lookup(m.ID, m.ThreadID)
	if err != nil {
		return err
	}
	active, err := s.h.core.Active(ctx, ref.thread)
	if err != nil {
		return err
	}
	if active == "" || (ref.run != "" && active != ref.run) {
		return protocol.Errorf(protocol.CodeNotFound, "run %q is not running", m.ID)
	}
	if err := s.h.core.Cancel(ctx, ref.thread); err != nil {
		if protocol.AsError(err).Code == protocol.CodeNotFound {
			return protocol.Errorf(protocol.CodeNotFound, "run %q is not running", m.ID)
		}
		return err
	}
	return nil
}

// lookup finds the run a tool_approval_response or cancel names: a run of
// this socket, else one streamed by another socket of this handler, else
// the run of the thread thread names (id being the core's run id, or the
// thread's active run).
func (s *session) lookup(id string, thread *string) (runRef, error) {
	if t := deref(thread); t != "" {
		t, err := protocol.CanonicalThread(t)
		if err != nil {
			return runRef{}, err
		}
		if ref, ok := s.ref(id); ok && ref.thread == t {
			return ref, nil
		}
		if ref, ok := s.h.ref(s.who, id); ok && ref.thread == t {
			return ref, nil
		}
		return runRef{thread: t}, nil
	}
	if ref, ok := s.ref(id); ok {
		return ref, nil
	}
	if ref, ok := s.h.ref(s.who, id); ok {
		return ref, nil
	}
	return runRef{}, protocol.Errorf(protocol.CodeNotFound,
		"unknown run %q: give the run's thread_id (the session_id of its events) for a run this server's Loom sockets did not start", id)
}

// checkFolder refuses a working folder outside the server's.
func (h *Handler) checkFolder(folder string) error {
	rel, err := h.root.Resolve(folder)
	if err == nil {
		var fi os.FileInfo
		if fi, err = os.Stat(filepath.Join(h.root.Dir(), rel)); err == nil && !fi.IsDir() {
			err = errors.New("not a folder")
		}
		if err != nil {
			return &protocol.Error{Code: protocol.CodeInvalid, Path: "/working_folder", Cause: err,
				Message: fmt.Sprintf("working_folder %q is not a folder of the server's working folder; nothing was run", folder)}
		}
	}
	if err != nil {
		if errors.Is(err, sandbox.ErrEscape) {
			return &protocol.Error{Code: protocol.CodeInvalid, Path: "/working_folder", Cause: err,
				Message: fmt.Sprintf("working_folder %q is outside the server's working folder; nothing was run", folder)}
		}
		return &protocol.Error{Code: protocol.CodeInvalid, Path: "/working_folder", Cause: err,
			Message: fmt.Sprintf("working_folder %q: %v; nothing was run", folder, errors.Unwrap(err))}
	}
	return nil
}

// toolSpec is a tool as tools_list and tool_show give it.
func toolSpec(t tools.Spec) loomapi.ToolSpec {
	out := loomapi.ToolSpec{Name: t.Name, InputSchema: loomapi.ToolSpecInputSchema{}}
	if t.Description != "" {
		out.Description = new(t.Description)
	}
	if len(t.InputSchema) > 0 {
		_ = json.Unmarshal(t.InputSchema, &out.InputSchema)
	}
	return out
}

// toolYAML is a tool's definition as a YAML document, with the fields in
// the order tools_list gives them.
func toolYAML(t loomapi.ToolSpec) (string, error) {
	doc := yaml.Node{Kind: yaml.MappingNode}
	add := func(key string, v any) error {
		var n yaml.Node
		if err := n.Encode(v); err != nil {
			return err
		}
		doc.Content = append(doc.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key}, &n)
		return nil
	}
	if err := add("name", t.Name); err != nil {
		return "", err
	}
	if t.Description != nil {
		if err := add("description", *t.Description); err != nil {
			return "", err
		}
	}
	if err := add("input_schema", map[string]any(t.InputSchema)); err != nil {
		return "", err
	}
	b, err := yaml.Marshal(&doc)
	return string(b), err
}
