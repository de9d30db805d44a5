package anthropic

import (
	"encoding/json"
	"errors"

	sdk "github.com/anthropics/anthropic-sdk-go"

	"github.com/agentwire/agentwire/internal/llm"
)

// apiError returns err as an *llm.APIError if the API reported it, with an
// HTTP status or as an error event in the stream; else nil.
func apiError(err error) *llm.APIError {
	e, ok := errors.AsType[*sdk.Error](err)
	if !ok {
		return nil
	}
	a := &llm.APIError{Provider: "anthropic", Err: err}
	if e.StatusCode >= 400 {
		// An error event arrives on a 200 response: it has no status.
		a.StatusCode = e.StatusCode
	}
	a.Type, a.Message = errorBody([]byte(e.RawJSON()))
	if a.Type == "" {
		a.Type = string(e.Type())
	}
	return a
}

// errorBody decodes the API's error envelope,
// {"type": "error", "error": {"type", "message"}}; a body that is not one is
// the message.
func errorBody(raw []byte) (typ, msg string) {
	var env struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(raw, &env) != nil || (env.Error.Type == "" && env.Error.Message == "") {
		return "", string(raw)
	}
	return env.Error.Type, env.Error.Message
}
