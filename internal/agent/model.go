package agent

// Calling the model: one step's call, streamed into events as it comes.

import (
	"context"
	"errors"
	"iter"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/llm"
	"github.com/agentwire/agentwire/internal/tracing"
)

// think makes one model call and streams it into events. It returns the
// assistant turn as the model will see it in later calls.
func (r *run) think(ctx context.Context) (llm.Message, error) {
	r.emit(event.NodeEntered{Node: "think"})
	specs := r.toolSpecs()
	r.fitContext(ctx, specs)
	r.lastUsage = llm.Usage{}
	sent := len(r.msgs)
	turn, err := r.stream(ctx, llm.Request{System: r.system, Messages: r.msgs, Tools: specs}, "")
	r.calibrate(sent)
	exit := event.NodeExited{Node: "think"}
	if err != nil {
		exit.Error = err.Error()
	}
	r.emit(exit)
	return turn, err
}

// stream runs one model call, emitting message, reasoning, tool call and
// usage events. purpose marks the message (see event.PurposeExplanation).
func (r *run) stream(ctx context.Context, req llm.Request, purpose string) (llm.Message, error) {
	var (
		text      strings.Builder
		msgID     string
		msgDone   bool
		reasonID  string
		reasoning strings.Builder
		signature string
		started   time.Time
		calls     []llm.ToolCall
		callIDs   = map[int]string{}
		names     = map[int]string{}
		usage     []llm.Usage
		finished  bool
		turn      = llm.Message{Role: llm.RoleAssistant}
	)
	endReasoning := func() {
		if reasonID != "" {
			r.emit(event.ReasoningCompleted{ReasoningID: reasonID, Text: reasoning.String(), Signature: signature,
				DurationMS: time.Since(started).Milliseconds()})
			turn.Reasoning += reasoning.String()
			reasonID, signature = "", ""
			reasoning.Reset()
		}
	}
	endMessage := func() {
		if msgID != "" && !msgDone {
			msgDone = true
			r.emit(event.MessageCompleted{MessageID: msgID, Role: event.RoleAssistant, Agent: r.name, Text: text.String(), Purpose: purpose})
		}
	}
	var streamErr error
	for ch, err := range r.call(ctx, r.model, req, "step") {
		if err != nil {
			streamErr = err
			break
		}
		switch ch.Type {
		case llm.ChunkText:
			endReasoning()
			if msgID == "" {
				msgID = event.NewID()
				r.emit(event.MessageStarted{MessageID: msgID, Role: event.RoleAssistant, Agent: r.name, Purpose: purpose})
			}
			if ch.Text != "" {
				text.WriteString(ch.Text)
				r.emit(event.MessageDelta{MessageID: msgID, Text: ch.Text})
			}
		case llm.ChunkReasoning:
			if reasonID == "" {
				reasonID, started = event.NewID(), time.Now()
			}
			reasoning.WriteString(ch.Text)
			r.emit(event.ReasoningDelta{ReasoningID: reasonID, Text: ch.Text})
		case llm.ChunkReasoningSignature:
			turn.ReasoningSignature = ch.Signature
			if reasonID != "" {
				signature = ch.Signature
			} else {
				r.emit(event.ReasoningCompleted{ReasoningID: event.NewID(), Signature: ch.Signature})
			}
		case llm.ChunkToolStart:
			endReasoning()
			endMessage()
			id := r.ids.claim(ch.CallID)
			callIDs[ch.Index], names[ch.Index] = id, ch.Name
			r.emit(event.ToolCallStarted{CallID: id, Name: ch.Name, Agent: r.name})
		case llm.ChunkToolDelta:
			if id, ok := callIDs[ch.Index]; ok && ch.Arguments != "" {
				r.emit(event.ToolCallDelta{CallID: id, ArgumentsDelta: ch.Arguments})
			}
		case llm.ChunkToolDone:
			id, ok := callIDs[ch.Index]
			if !ok {
				id = r.ids.claim(ch.CallID)
				r.emit(event.ToolCallStarted{CallID: id, Name: ch.Name, Agent: r.name})
			}
			name := ch.Name
			if name == "" {
				name = names[ch.Index]
			}
			args := validJSON(ch.Arguments)
			calls = append(calls, llm.ToolCall{ID: id, Name: name, Arguments: string(args)})
			r.emit(event.ToolCallCompleted{CallID: id, Name: name, Arguments: args, Agent: r.name})
		case llm.ChunkUsage:
			// Reported after the turn's output, which is closed first.
			usage = append(usage, ch.Usage)
		case llm.ChunkFinish:
			finished = true
		}
	}
	endReasoning()
	endMessage()
	for _, u := range usage {
		e := r.usage(r.model, u, purpose)
		e.Model = modelName(r.model)
		r.emit(e)
		if purpose == "" {
			r.lastUsage = u
		}
	}
	turn.Content = text.String()
	turn.ToolCalls = calls
	if streamErr == nil && ctx.Err() != nil {
		streamErr = ctx.Err()
	}
	if streamErr == nil && !finished {
		streamErr = errors.New("the model's stream ended without finishing")
	}
	return turn, streamErr
}

// modelName is m's name, or "" without a model.
func modelName(m llm.Model) string {
	if m == nil {
		return ""
	}
	return m.Name()
}

// streamTraced is m.Stream(ctx, req) inside a span of the run's trace
// (internal/tracing): the model, what the call was for, its tokens and
// its error.
func streamTraced(ctx context.Context, m llm.Model, req llm.Request, what string) iter.Seq2[llm.Chunk, error] {
	return func(yield func(llm.Chunk, error) bool) {
		ctx, span := tracing.Start(ctx, "agentwire.model", attribute.String("gen_ai.request.model", m.Name()), attribute.String("agentwire.purpose", what))
		defer span.End()
		var in, out int64
		for ch, err := range m.Stream(ctx, req) {
			if err != nil {
				span.RecordError(err)
				span.SetStatus(codes.Error, err.Error())
			}
			if ch.Type == llm.ChunkUsage {
				in += int64(ch.Usage.PromptTokens)
				out += int64(ch.Usage.CompletionTokens)
			}
			if !yield(ch, err) {
				break
			}
		}
		span.SetAttributes(attribute.Int64("gen_ai.usage.input_tokens", in), attribute.Int64("gen_ai.usage.output_tokens", out))
	}
}
