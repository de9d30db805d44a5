package tools

import (
	"context"
	"encoding/json"
	"errors"
)

// Asker lets a tool ask a person something while it runs. The agent puts one
// in the context of every call (WithAsker); tools such as ask_user and ui
// take it out with AskerFrom.
type Asker interface {
	// Ask asks for text and waits for the answer. It returns
	// ErrInputTimedOut when the request's timeout passes first.
	Ask(ctx context.Context, req InputRequest) (string, error)
	// RequestUI asks the frontend to render a component and waits for the
	// data it returns.
	RequestUI(ctx context.Context, req UIRequest) (json.RawMessage, error)
}

// InputRequest is a question for a person.
type InputRequest struct {
	Prompt string
	// Secret asks the frontend to mask the answer (a password, a key).
	Secret bool
	// TimeoutSeconds, when positive, bounds the wait.
	TimeoutSeconds int
}

// UIRequest asks the frontend to render a component.
type UIRequest struct {
	Component string
	Payload   json.RawMessage
	// Display is "inline" (default) or "artifact".
	Display string
}

// ErrInputTimedOut is returned by Asker.Ask when nobody answered in time.
var ErrInputTimedOut = errors.New("nobody answered in time")

// ErrNoAsker is returned by tools that need a person when the context has
// no Asker.
var ErrNoAsker = errors.New("no person is available to answer")

type askerKey struct{}

// WithAsker returns ctx carrying a.
func WithAsker(ctx context.Context, a Asker) context.Context {
	return context.WithValue(ctx, askerKey{}, a)
}

// AskerFrom returns the Asker in ctx, if any.
func AskerFrom(ctx context.Context) (Asker, bool) {
	a, ok := ctx.Value(askerKey{}).(Asker)
	return a, ok
}
