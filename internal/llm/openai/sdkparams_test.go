package openai

import (
	"encoding/json"
	"fmt"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"github.com/agentwire/agentwire/internal/llm"
)

// The SDK's request types, as Model.Stream built its requests before it
// wrote them itself (request): the baseline of BenchmarkRequest, and
// what TestRequestMatchesSDK holds request to.

// params builds the Chat Completions request for req with the SDK's types.
func (m *Model) params(req llm.Request) (oai.ChatCompletionNewParams, error) {
	p := oai.ChatCompletionNewParams{
		Model:         m.model,
		StreamOptions: oai.ChatCompletionStreamOptionsParam{IncludeUsage: param.NewOpt(true)},
	}
	if req.System != "" {
		p.Messages = append(p.Messages, oai.SystemMessage(req.System))
	}
	for i, msg := range req.Messages {
		switch msg.Role {
		case llm.RoleUser:
			p.Messages = append(p.Messages, oai.UserMessage(msg.Content))
		case llm.RoleAssistant:
			p.Messages = append(p.Messages, assistant(msg))
		case llm.RoleTool:
			p.Messages = append(p.Messages, oai.ToolMessage(msg.Content, msg.ToolCallID))
		default:
			return p, fmt.Errorf("openai: message %d has unknown role %q", i, msg.Role)
		}
	}
	for _, t := range req.Tools {
		schema, err := parameters(t)
		if err != nil {
			return p, err
		}
		fn := shared.FunctionDefinitionParam{Name: t.Name, Parameters: schema}
		if t.Description != "" {
			fn.Description = param.NewOpt(t.Description)
		}
		p.Tools = append(p.Tools, oai.ChatCompletionFunctionTool(fn))
	}
	if s := req.Structured; s != nil {
		schema, strict := strictSchema(s.JSON)
		var decoded map[string]any
		if err := json.Unmarshal(schema, &decoded); err != nil {
			return p, err
		}
		js := shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: s.Name, Schema: decoded, Strict: param.NewOpt(strict)}
		if s.Description != "" {
			js.Description = param.NewOpt(s.Description)
		}
		p.ResponseFormat = oai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{JSONSchema: js}}
	}
	maxTokens := req.MaxTokens
	if maxTokens == 0 {
		maxTokens = m.maxTokens
	}
	if maxTokens > 0 {
		if m.maxTokensField {
			p.MaxTokens = param.NewOpt(int64(maxTokens))
		} else {
			p.MaxCompletionTokens = param.NewOpt(int64(maxTokens))
		}
	}
	return p, nil
}

// assistant is an assistant message with its text and tool calls.
func assistant(msg llm.Message) oai.ChatCompletionMessageParamUnion {
	a := oai.ChatCompletionAssistantMessageParam{}
	if msg.Content != "" || len(msg.ToolCalls) == 0 {
		a.Content.OfString = param.NewOpt(msg.Content)
	}
	for _, c := range msg.ToolCalls {
		args := c.Arguments
		if args == "" {
			args = "{}"
		}
		a.ToolCalls = append(a.ToolCalls, oai.ChatCompletionMessageToolCallUnionParam{
			OfFunction: &oai.ChatCompletionMessageFunctionToolCallParam{
				ID:       c.ID,
				Function: oai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Name, Arguments: args},
			},
		})
	}
	return oai.ChatCompletionMessageParamUnion{OfAssistant: &a}
}

// parameters decodes a tool's JSON Schema; a tool without one takes an
// empty object.
func parameters(t llm.ToolSpec) (shared.FunctionParameters, error) {
	if len(t.Parameters) == 0 {
		return shared.FunctionParameters{"type": "object", "properties": map[string]any{}}, nil
	}
	var schema shared.FunctionParameters
	if err := json.Unmarshal(t.Parameters, &schema); err != nil {
		return nil, fmt.Errorf("openai: tool %q: parameters are not a JSON object: %w", t.Name, err)
	}
	return schema, nil
}

// sdkRequest is what the SDK sent for req: params, encoded by the SDK,
// with "stream": true set as Model.Stream set it.
func (m *Model) sdkRequest(req llm.Request) ([]byte, error) {
	p, err := m.params(req)
	if err != nil {
		return nil, err
	}
	b, err := p.MarshalJSON()
	if err != nil {
		return nil, err
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(b, &body); err != nil {
		return nil, err
	}
	body["stream"] = json.RawMessage("true")
	return json.Marshal(body)
}
