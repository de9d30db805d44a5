package agentloop

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentwire/agentwire/generated/agentloopapi"
	"github.com/agentwire/agentwire/internal/protocol"
)

// inputPart is one part of a message's content array
// (schemas/agentloop/input_content_part.json), which the server checks
// itself: the schema declares content as any JSON value, since it is a
// string or an array.
type inputPart struct {
	Type *string `json:"type"`
	Text *string `json:"text"`
}

// inputText is the text a user_input runs on: its user messages' text,
// parts joined by a newline and items by a blank line. An item without
// type is a message; a message needs role and content, a string or an
// array of parts. An item or part of a type the server cannot run is
// refused by name, with its path.
func inputText(items []agentloopapi.ResponseInputItem) (string, error) {
	var texts []string
	for i, it := range items {
		at := fmt.Sprintf("/payload/input/%d", i)
		if it.Type != nil && *it.Type != "message" {
			return "", &protocol.Error{Code: protocol.CodeInvalid, Type: agentloopapi.TypeUserInput, Path: at + "/type",
				Message: fmt.Sprintf("Unsupported input item type %q: only message items are supported; nothing was run", *it.Type)}
		}
		if it.Role == nil {
			return "", invalidInput(at+"/role", "is required")
		}
		parts, err := contentText(it.Content, at+"/content")
		if err != nil {
			return "", err
		}
		if *it.Role == "user" {
			if t := strings.Join(parts, "\n"); strings.TrimSpace(t) != "" {
				texts = append(texts, t)
			}
		}
	}
	if len(texts) == 0 {
		return "", &protocol.Error{Code: protocol.CodeInvalid, Type: agentloopapi.TypeUserInput, Path: "/payload/input",
			Message: "The input has no user text; nothing was run"}
	}
	return strings.Join(texts, "\n\n"), nil
}

// contentText is the text of a message's content, part by part.
func contentText(raw json.RawMessage, at string) ([]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, invalidInput(at, "is required")
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, invalidInput(at, "must be a string or an array of content parts")
		}
		return []string{s}, nil
	case '[':
	default:
		return nil, invalidInput(at, "must be a string or an array of content parts")
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, invalidInput(at, "must be a string or an array of content parts")
	}
	parts := make([]string, 0, len(elems))
	for j, e := range elems {
		pat := fmt.Sprintf("%s/%d", at, j)
		var p inputPart
		if e = bytes.TrimSpace(e); len(e) == 0 || e[0] != '{' || json.Unmarshal(e, &p) != nil {
			return nil, invalidInput(pat, "must be an object with a type")
		}
		switch {
		case p.Type == nil:
			return nil, invalidInput(pat+"/type", "is required")
		case *p.Type != "input_text" && *p.Type != "output_text":
			return nil, &protocol.Error{Code: protocol.CodeInvalid, Type: agentloopapi.TypeUserInput, Path: pat + "/type",
				Message: fmt.Sprintf("Unsupported content type %q: only text (input_text) is supported; nothing was run", *p.Type)}
		case p.Text == nil:
			return nil, invalidInput(pat+"/text", "is required")
		}
		parts = append(parts, *p.Text)
	}
	return parts, nil
}

// invalidInput is the error of input the schema could not check, worded
// as a schema failure is.
func invalidInput(path, reason string) error {
	return &protocol.Error{Code: protocol.CodeInvalid, Type: agentloopapi.TypeUserInput, Path: path,
		Message: "Invalid message: " + path + ": " + reason}
}
