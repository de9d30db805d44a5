package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentwire/agentwire/internal/tools"
)

type askUserArgs struct {
	Prompt         string `json:"prompt"`
	Secret         bool   `json:"secret"`
	TimeoutSeconds int    `json:"timeout_seconds"`
}

func askUserTool() tools.Tool {
	return &tool[askUserArgs]{
		name: "ask_user",
		desc: "Ask the person a question and wait for the answer. Set secret for passwords and keys (the answer is masked as typed).",
		schema: `{"type":"object","properties":{` +
			`"prompt":{"type":"string","description":"The question"},` +
			`"secret":{"type":"boolean","description":"The answer is a secret"},` +
			`"timeout_seconds":{"type":"integer","minimum":1,"description":"Give up after this many seconds"}},` +
			`"required":["prompt"],"additionalProperties":false}`,
		max: tools.EffectRead,
		run: func(ctx context.Context, a askUserArgs, _ tools.Output) (tools.Result, error) {
			if a.Prompt == "" {
				return failf("prompt is required"), nil
			}
			asker, found := tools.AskerFrom(ctx)
			if !found {
				return fail(tools.ErrNoAsker), nil
			}
			answer, err := asker.Ask(ctx, tools.InputRequest{Prompt: a.Prompt, Secret: a.Secret, TimeoutSeconds: max(a.TimeoutSeconds, 0)})
			if errors.Is(err, tools.ErrInputTimedOut) {
				// Returned, not a result: the run decides whether it ends.
				return tools.Result{}, fmt.Errorf("ask_user: %w", err)
			}
			if err != nil {
				return tools.Result{}, err
			}
			return ok("%s", answer), nil
		},
	}
}

type uiArgs struct {
	Component string          `json:"component"`
	Payload   json.RawMessage `json:"payload"`
	Display   string          `json:"display"`
}

func uiTool() tools.Tool {
	return &tool[uiArgs]{
		name: "ui",
		desc: "Ask the person's frontend to show a component (a form, a choice, a confirmation) with a payload, and wait for the data it returns.",
		schema: `{"type":"object","properties":{` +
			`"component":{"type":"string","description":"The component's name, as the frontend knows it"},` +
			`"payload":{"description":"Data for the component"},` +
			`"display":{"type":"string","enum":["inline","artifact"],"description":"Where the component is shown: inline in the conversation (default) or as an artifact beside it"}},` +
			`"required":["component"],"additionalProperties":false}`,
		max: tools.EffectRead,
		run: func(ctx context.Context, a uiArgs, _ tools.Output) (tools.Result, error) {
			if a.Component == "" {
				return failf("component is required"), nil
			}
			asker, found := tools.AskerFrom(ctx)
			if !found {
				return fail(tools.ErrNoAsker), nil
			}
			data, err := asker.RequestUI(ctx, tools.UIRequest{Component: a.Component, Payload: a.Payload, Display: a.Display})
			if errors.Is(err, tools.ErrInputTimedOut) {
				return tools.Result{}, fmt.Errorf("ui: %w", err)
			}
			if err != nil {
				return tools.Result{}, err
			}
			if len(data) == 0 {
				return tools.Result{Content: "null"}, nil
			}
			return tools.Result{Content: string(data)}, nil
		},
	}
}
