package gemini

import (
	"errors"
	"strconv"
	"strings"

	"google.golang.org/genai"

	"github.com/agentwire/agentwire/internal/llm"
)

// apiError returns err as an *llm.APIError if the API reported it, with an
// HTTP status or as an error in the stream; else nil.
func apiError(err error) *llm.APIError {
	e, ok := errors.AsType[genai.APIError](err)
	if !ok {
		return nil
	}
	a := &llm.APIError{Provider: "gemini", StatusCode: e.Code, Type: e.Status, Message: e.Message, Err: err}
	if strings.HasPrefix(a.Type, strconv.Itoa(e.Code)+" ") {
		// A body that was not the API's JSON gets the HTTP status line,
		// which says nothing StatusCode does not.
		a.Type = ""
	}
	return a
}
