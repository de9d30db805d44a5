package gemini

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"google.golang.org/genai"

	"github.com/agentwire/agentwire/internal/llm"
)

// syntheticID begins the ids of calls the API sent without one. They are
// not sent back: the API pairs such calls and responses by name and order.
const syntheticID = "gemini-call-"

// request builds the contents and config for req.
func (m *Model) request(req llm.Request) ([]*genai.Content, *genai.GenerateContentConfig, error) {
	config := &genai.GenerateContentConfig{HTTPOptions: &genai.HTTPOptions{RetryOptions: m.retry}}
	if req.System != "" {
		config.SystemInstruction = &genai.Content{Parts: []*genai.Part{{Text: req.System}}}
	}
	if n := req.MaxTokens; n > 0 {
		config.MaxOutputTokens = int32(n)
	} else if m.maxTokens > 0 {
		config.MaxOutputTokens = int32(m.maxTokens)
	}
	if m.thoughts {
		config.ThinkingConfig = &genai.ThinkingConfig{IncludeThoughts: true}
	}
	if s := req.Structured; s != nil {
		config.ResponseMIMEType = "application/json"
		if schema, err := responseSchema(s.JSON); err == nil {
			config.ResponseSchema = schema
		} else {
			// What the OpenAPI subset cannot say, JSON Schema can.
			var js map[string]any
			if err := json.Unmarshal(s.JSON, &js); err != nil {
				return nil, nil, fmt.Errorf("gemini: schema %q is not a JSON object: %w", s.Name, err)
			}
			config.ResponseJsonSchema = js
		}
	}
	if len(req.Tools) > 0 {
		tool := &genai.Tool{}
		for _, t := range req.Tools {
			fd := &genai.FunctionDeclaration{Name: t.Name, Description: t.Description}
			if len(t.Parameters) > 0 {
				var schema map[string]any
				if err := json.Unmarshal(t.Parameters, &schema); err != nil {
					return nil, nil, fmt.Errorf("gemini: tool %q: parameters are not a JSON object: %w", t.Name, err)
				}
				fd.ParametersJsonSchema = schema
			}
			tool.FunctionDeclarations = append(tool.FunctionDeclarations, fd)
		}
		config.Tools = []*genai.Tool{tool}
	}

	var contents []*genai.Content
	names := map[string]string{} // call id → function name, for results without one
	for i, msg := range req.Messages {
		var (
			role  string
			parts []*genai.Part
		)
		switch msg.Role {
		case llm.RoleUser:
			role = genai.RoleUser
			if msg.Content != "" {
				parts = append(parts, &genai.Part{Text: msg.Content})
			}
		case llm.RoleAssistant:
			role = genai.RoleModel
			parts = modelParts(msg)
			for _, c := range msg.ToolCalls {
				names[c.ID] = c.Name
			}
		case llm.RoleTool:
			role = genai.RoleUser
			name := msg.Name
			if name == "" {
				name = names[msg.ToolCallID]
			}
			key := "output"
			if msg.IsError {
				key = "error"
			}
			parts = append(parts, &genai.Part{FunctionResponse: &genai.FunctionResponse{
				ID: apiID(msg.ToolCallID), Name: name, Response: map[string]any{key: msg.Content},
			}})
		default:
			return nil, nil, fmt.Errorf("gemini: message %d has unknown role %q", i, msg.Role)
		}
		if len(parts) == 0 {
			continue // the API refuses contents without parts
		}
		// A turn's function responses go in one content, with any words
		// that follow them.
		if n := len(contents); n > 0 && contents[n-1].Role == role {
			contents[n-1].Parts = append(contents[n-1].Parts, parts...)
			continue
		}
		contents = append(contents, &genai.Content{Role: role, Parts: parts})
	}
	return contents, config, nil
}

// modelParts is a model turn's text and function calls. Its thought
// signature, which Gemini wants back with the turn's first function call (or
// else on its last part), goes there.
func modelParts(msg llm.Message) []*genai.Part {
	var parts []*genai.Part
	if msg.Content != "" {
		parts = append(parts, &genai.Part{Text: msg.Content})
	}
	first := len(parts)
	for _, c := range msg.ToolCalls {
		var args map[string]any
		if strings.TrimSpace(c.Arguments) != "" {
			if err := json.Unmarshal([]byte(c.Arguments), &args); err != nil {
				// The model wrote something that is not an object; sending
				// it back as such would be refused.
				args = map[string]any{}
			}
		}
		parts = append(parts, &genai.Part{FunctionCall: &genai.FunctionCall{ID: apiID(c.ID), Name: c.Name, Args: args}})
	}
	// A signature that is not base64 is not Gemini's (another provider
	// wrote this turn) and is left out.
	if sig, err := base64.StdEncoding.DecodeString(msg.ReasoningSignature); err == nil && len(sig) > 0 && len(parts) > 0 {
		if first < len(parts) {
			parts[first].ThoughtSignature = sig
		} else {
			parts[len(parts)-1].ThoughtSignature = sig
		}
	}
	return parts
}

// apiID is the id to send back for a call: none if the API gave none.
func apiID(id string) string {
	if strings.HasPrefix(id, syntheticID) {
		return ""
	}
	return id
}
