package llm

import (
	"context"
	"fmt"
	"io"
	"log/slog"
)

// StreamEnd is what a provider's Model.Stream knows once the provider's
// stream of one turn has ended and the consumer is still reading; EndStream
// turns it into the stream's last chunk or error.
type StreamEnd struct {
	// Endpoint says where the turn went: its Provider names the API in
	// errors and in the log, and a failed call's error says what to change
	// (Explain).
	Endpoint
	// Log gets a debug line for each finished turn.
	Log *slog.Logger
	// Err is the error the provider's stream ended with, or nil.
	Err error
	// APIError is the provider's mapping of Err to an *APIError when the
	// API reported it; it returns nil for any other error.
	APIError func(error) *APIError
	// Finished says whether the model finished the turn. A stream that ended
	// without it ended early: its error reads "<provider>: the stream ended
	// before <Before>".
	Finished bool
	Before   string
	// End yields the turn's closing chunks, ChunkFinish last, and returns the
	// turn's finish reason and usage; ok is false when the consumer stopped.
	End func() (finish FinishReason, usage Usage, ok bool)
}

// EndStream ends a provider's Model.Stream by yielding the first that
// applies of: the error the provider's stream ended with (ctx's error if ctx
// is done, else the error explained: a *CallError), ctx's error, and an
// error wrapping io.ErrUnexpectedEOF for a turn the model did not finish.
// Otherwise it calls e.End and logs the finished turn.
func EndStream(ctx context.Context, yield func(Chunk, error) bool, e StreamEnd) {
	if e.Err != nil {
		yield(Chunk{}, streamError(ctx, e))
		return
	}
	if err := ctx.Err(); err != nil {
		yield(Chunk{}, err)
		return
	}
	if !e.Finished {
		yield(Chunk{}, fmt.Errorf("%s: the stream ended before %s: %w", e.Provider, e.Before, io.ErrUnexpectedEOF))
		return
	}
	if finish, usage, ok := e.End(); ok {
		e.Log.DebugContext(ctx, "model call done", "provider", e.Provider, "model", e.Model,
			"finish", finish, "prompt_tokens", usage.PromptTokens, "completion_tokens", usage.CompletionTokens)
	}
}

// streamError turns what ended a provider's stream into the error the
// Model's stream yields: the context's error when it is done, else a
// *CallError that says what to change, wrapping the *APIError for what the
// API reported, or e.Err. The raw cause is logged.
func streamError(ctx context.Context, e StreamEnd) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	e.Log.WarnContext(ctx, "model call failed", "provider", e.Provider, "model", e.Model, "url", e.URL, "err", e.Err)
	return ExplainCall(e.Endpoint, e.Err, e.APIError)
}
