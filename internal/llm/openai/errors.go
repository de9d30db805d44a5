package openai

import (
	"encoding/json"
	"errors"
	"strconv"

	oai "github.com/openai/openai-go/v3"

	"github.com/agentwire/agentwire/internal/llm"
)

// apiError returns err as an *llm.APIError if the API reported it, with an
// HTTP status or as an error event in the stream; else nil.
func apiError(err error) *llm.APIError {
	if e, ok := errors.AsType[*oai.Error](err); ok {
		a := &llm.APIError{Provider: "openai", StatusCode: e.StatusCode, Type: e.Type, Message: e.Message, Err: err}
		if e.Code != "" {
			a.Type = e.Code
		}
		if a.Message == "" {
			// Servers other than OpenAI may answer with a bare message.
			a.Message = e.RawJSON()
		}
		return a
	}
	if e, ok := errors.AsType[*eventError](err); ok {
		return streamEventError(e.data, err)
	}
	return nil
}

// streamEventError decodes an error event sent in place of a chunk:
// {"error": {"message", "type", "code"}}, where vLLM puts the HTTP status in
// code and OpenAI a string.
func streamEventError(data []byte, err error) *llm.APIError {
	a := &llm.APIError{Provider: "openai", Err: err}
	var ev struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(data, &ev) != nil || len(ev.Error) == 0 {
		a.Message = string(data)
		return a
	}
	var body struct {
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"`
	}
	if json.Unmarshal(ev.Error, &body) != nil {
		// Some servers send the message as a bare string.
		var msg string
		if json.Unmarshal(ev.Error, &msg) == nil {
			a.Message = msg
		} else {
			a.Message = string(ev.Error)
		}
		return a
	}
	a.Message, a.Type = body.Message, body.Type
	var code string
	if json.Unmarshal(body.Code, &code) == nil && code != "" {
		a.Type = code
	} else if n, err := strconv.Atoi(string(body.Code)); err == nil {
		a.StatusCode = n
	}
	return a
}
