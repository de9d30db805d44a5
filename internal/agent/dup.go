package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentwire/agentwire/internal/event"
)

// understandInstruction is the instruction of dup's first step.
const understandInstruction = `Strategy step: understand.
Before doing anything, work out what the user's last message asks for. Reply with only a JSON object of this shape, and nothing else:
{"core_goal": "the one thing the user wants, in a sentence", "key_constraints": ["each requirement or limit the answer must respect"], "relevant_context": "what in the conversation or the working folder matters for it"}
core_goal must not be empty; key_constraints may be an empty list.`

// planInstruction is the instruction of dup's second step; %s is the
// understanding.
const planInstruction = `Strategy step: plan.
This is what the user's last message asks for:
%s
Write a short numbered plan (at most seven steps) to achieve the core goal within the constraints, naming the tools you will use. Write only the plan; do not carry it out yet.`

// actInstruction is the instruction of dup's act phase.
const actInstruction = `Strategy step: act.
This is what the user's last message asks for:
%s
This is your plan:
%s
Carry out the plan with the tools, adapting it to what you observe, then give the user your final answer.`

// understandSchema is the structure of the understand step's answer.
var understandSchema = schema("understanding", `{"type": "object",
	"properties": {
		"core_goal": {"type": "string", "description": "the one thing the user wants, in a sentence"},
		"key_constraints": {"type": "array", "items": {"type": "string"}, "description": "each requirement or limit the answer must respect"},
		"relevant_context": {"type": "string", "description": "what in the conversation or the working folder matters for it"}
	},
	"required": ["core_goal", "key_constraints", "relevant_context"],
	"additionalProperties": false}`)

// maxFallbackChars caps the model's prose where a step's fallback uses it.
const maxFallbackChars = 2000

// understanding is what dup's understand step yields.
type understanding struct {
	CoreGoal        string   `json:"core_goal"`
	KeyConstraints  []string `json:"key_constraints"`
	RelevantContext string   `json:"relevant_context"`
}

// parseUnderstanding validates the understand step's answer.
func parseUnderstanding(text string, u *understanding) error {
	var raw struct {
		CoreGoal        *string         `json:"core_goal"`
		KeyConstraints  json.RawMessage `json:"key_constraints"`
		RelevantContext *string         `json:"relevant_context"`
	}
	if err := decodeJSON(text, &raw); err != nil {
		return err
	}
	if raw.CoreGoal == nil || strings.TrimSpace(*raw.CoreGoal) == "" {
		return invalid("core_goal is missing or empty")
	}
	var cons []string
	if len(raw.KeyConstraints) == 0 || string(raw.KeyConstraints) == "null" {
		return invalid("key_constraints is missing: give a list of strings, possibly empty")
	}
	if err := json.Unmarshal(raw.KeyConstraints, &cons); err != nil {
		return invalid("key_constraints is not a list of strings")
	}
	if raw.RelevantContext == nil {
		return invalid("relevant_context is missing: give a string, possibly empty")
	}
	*u = understanding{CoreGoal: strings.TrimSpace(*raw.CoreGoal), KeyConstraints: cons, RelevantContext: *raw.RelevantContext}
	return nil
}

func (u understanding) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Core goal: %s\n", u.CoreGoal)
	if len(u.KeyConstraints) > 0 {
		b.WriteString("Key constraints:\n")
		for _, c := range u.KeyConstraints {
			fmt.Fprintf(&b, "- %s\n", c)
		}
	}
	if u.RelevantContext != "" {
		fmt.Fprintf(&b, "Relevant context: %s\n", u.RelevantContext)
	}
	return b.String()
}

// dup is understand → plan → act → observe: the model first states the
// request's goal, constraints and context (structured, validated), then
// plans, then carries out the plan in a ReAct loop whose system prompt
// holds both, with an "observe" node after each round of tools.
func dup(ctx context.Context, r *run) {
	var u understanding
	if err := r.decide(ctx, r.msgs, step{node: "understand", instruction: understandInstruction, schema: understandSchema,
		parse: func(text string) error { return parseUnderstanding(text, &u) },
		fallback: func(text string) string {
			if text == "" {
				u = understanding{CoreGoal: clip(r.lastUserText(), maxFallbackChars)}
				return "the user's message stands for the understanding"
			}
			u = understanding{CoreGoal: clip(text, maxFallbackChars)}
			return "its own words stand for the understanding"
		},
	}); err != nil {
		r.fail(ctx, err)
		return
	}
	var plan string
	if err := r.decide(ctx, r.msgs, step{node: "plan", instruction: fmt.Sprintf(planInstruction, u),
		parse: func(text string) error {
			plan = strings.TrimSpace(text)
			if plan == "" {
				return invalid("the plan is empty")
			}
			return nil
		},
		fallback: func(string) string {
			plan = "1. Achieve the core goal, using the tools as needed, and give the user the final answer."
			return "the plan is the whole task in one step"
		},
	}); err != nil {
		r.fail(ctx, err)
		return
	}
	r.system = r.withInstruction(fmt.Sprintf(actInstruction, u, plan))
	reply, err := r.loop(ctx, true)
	if err != nil {
		r.fail(ctx, err)
		return
	}
	r.emit(event.RunCompleted{Reason: "final_answer", Reply: reply})
}
