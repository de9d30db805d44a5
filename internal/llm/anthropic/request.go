package anthropic

import (
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go"

	"github.com/agentwire/agentwire/internal/llm"
)

// params builds the Messages request for req.
func (m *Model) params(req llm.Request) (sdk.MessageNewParams, error) {
	p := sdk.MessageNewParams{Model: m.model, MaxTokens: int64(m.maxTokens)}
	if req.MaxTokens > 0 {
		p.MaxTokens = int64(req.MaxTokens)
	}
	switch {
	case req.Structured != nil:
		// Thinking cannot go with a forced tool.
	case m.adaptive:
		p.Thinking = sdk.ThinkingConfigParamUnion{OfAdaptive: &sdk.ThinkingConfigAdaptiveParam{}}
	case m.budget > 0 && int64(m.budget) < p.MaxTokens:
		p.Thinking = sdk.ThinkingConfigParamOfEnabled(int64(m.budget))
	}
	if req.System != "" {
		p.System = []sdk.TextBlockParam{{Text: req.System}}
	}
	for i, msg := range req.Messages {
		var (
			role   sdk.MessageParamRole
			blocks []sdk.ContentBlockParamUnion
		)
		switch msg.Role {
		case llm.RoleUser:
			role = sdk.MessageParamRoleUser
			if msg.Content != "" {
				blocks = append(blocks, sdk.NewTextBlock(msg.Content))
			}
		case llm.RoleAssistant:
			role, blocks = sdk.MessageParamRoleAssistant, assistant(msg)
		case llm.RoleTool:
			role = sdk.MessageParamRoleUser
			res := sdk.ToolResultBlockParam{ToolUseID: msg.ToolCallID}
			if msg.Content != "" {
				res.Content = []sdk.ToolResultBlockParamContentUnion{{OfText: &sdk.TextBlockParam{Text: msg.Content}}}
			}
			if msg.IsError {
				res.IsError = sdk.Bool(true)
			}
			blocks = append(blocks, sdk.ContentBlockParamUnion{OfToolResult: &res})
		default:
			return p, fmt.Errorf("anthropic: message %d has unknown role %q", i, msg.Role)
		}
		if len(blocks) == 0 {
			continue // the API refuses empty messages
		}
		// Roles must alternate: a turn's tool results, and any words that
		// follow them, go in one user message, results first.
		if n := len(p.Messages); n > 0 && p.Messages[n-1].Role == role {
			p.Messages[n-1].Content = append(p.Messages[n-1].Content, blocks...)
			continue
		}
		p.Messages = append(p.Messages, sdk.MessageParam{Role: role, Content: blocks})
	}
	for _, t := range req.Tools {
		schema, err := inputSchema(t)
		if err != nil {
			return p, err
		}
		tool := sdk.ToolParam{Name: t.Name, InputSchema: schema}
		if t.Description != "" {
			tool.Description = sdk.String(t.Description)
		}
		p.Tools = append(p.Tools, sdk.ToolUnionParam{OfTool: &tool})
	}
	if s := req.Structured; s != nil {
		// The answer is the input of a tool the model must call; the
		// stream gives that input back as the reply's text.
		schema, err := inputSchema(llm.ToolSpec{Name: s.Name, Parameters: s.JSON})
		if err != nil {
			return p, err
		}
		desc := s.Description
		if desc == "" {
			desc = "Give your answer as this tool's input."
		}
		p.Tools = append(p.Tools, sdk.ToolUnionParam{OfTool: &sdk.ToolParam{Name: s.Name, Description: sdk.String(desc), InputSchema: schema}})
		p.ToolChoice = sdk.ToolChoiceParamOfTool(s.Name)
	}
	return p, nil
}

// assistant is an assistant message's blocks: its signed thinking, which the
// API wants back unchanged (above all before tool results), its text and its
// tool calls.
func assistant(msg llm.Message) []sdk.ContentBlockParamUnion {
	var blocks []sdk.ContentBlockParamUnion
	if msg.ReasoningSignature != "" {
		blocks = append(blocks, sdk.NewThinkingBlock(msg.ReasoningSignature, msg.Reasoning))
	}
	if msg.Content != "" {
		blocks = append(blocks, sdk.NewTextBlock(msg.Content))
	}
	for _, c := range msg.ToolCalls {
		args := json.RawMessage(c.Arguments)
		if strings.TrimSpace(c.Arguments) == "" || !json.Valid(args) {
			args = json.RawMessage("{}")
		}
		blocks = append(blocks, sdk.NewToolUseBlock(c.ID, args, c.Name))
	}
	return blocks
}

// inputSchema splits a tool's JSON Schema into the SDK's fields; a tool
// without one takes an empty object.
func inputSchema(t llm.ToolSpec) (sdk.ToolInputSchemaParam, error) {
	var s sdk.ToolInputSchemaParam
	if len(t.Parameters) == 0 {
		s.Properties = map[string]any{}
		return s, nil
	}
	var schema map[string]any
	if err := json.Unmarshal(t.Parameters, &schema); err != nil {
		return s, fmt.Errorf("anthropic: tool %q: parameters are not a JSON object: %w", t.Name, err)
	}
	if props, ok := schema["properties"]; ok {
		s.Properties = props
	} else {
		s.Properties = map[string]any{}
	}
	if req, ok := schema["required"].([]any); ok {
		for _, r := range req {
			if name, ok := r.(string); ok {
				s.Required = append(s.Required, name)
			}
		}
	}
	delete(schema, "type")
	delete(schema, "properties")
	delete(schema, "required")
	if len(schema) > 0 {
		s.ExtraFields = schema
	}
	return s, nil
}
