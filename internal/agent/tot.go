package agent

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/llm"
)

// expandInstruction asks for candidate next steps: %d is how many.
const expandInstruction = `Strategy step: expand.
Propose up to %d different candidate next steps towards answering the user's last message, given the conversation so far. Each candidate is one short sentence: a tool to use and why, or the final answer to give.
Reply with only a JSON object of this shape, and nothing else:
{"candidates": ["first candidate", "second candidate"]}`

// evaluateInstruction asks for scores: %s are the numbered candidates.
const evaluateInstruction = `Strategy step: evaluate.
These are candidate next steps towards answering the user's last message:
%s
Score each from 0 (useless or wrong) to 1 (certainly the best way forward). Reply with only a JSON object of this shape, with one score per candidate in the same order, and nothing else:
{"scores": [0.5, 0.8]}`

// pursueInstruction is the system instruction of the step that follows a
// chosen candidate.
const pursueInstruction = `Strategy step: pursue.
Take this next step now: %s
Use the tools it needs, or, if it is the final answer, give the final answer.%s`

// finalInstruction ends a tree that reached its depth.
const finalInstruction = `Strategy step: conclude.
The search for the best approach has reached its depth limit. From what the conversation holds, give the user your final answer now.`

// level is one depth of tot's tree: its candidates, their order of
// preference and how many were tried, and the transcript they start from.
type level struct {
	cands  []string
	order  []int
	tried  int
	base   []llm.Message
	failed []string // candidates tried and failed, with why
}

// tot is tree-of-thoughts: at each depth the model proposes candidate
// next steps (tot.expanded), scores them (tot.evaluated) and the best is
// taken: a model call with the candidate in its instruction, which either
// answers (the run's reply) or calls tools. Tools that all fail make the
// candidate a dead end: the transcript goes back to where it stood before
// it and the next untried candidate of that depth is taken, or of a
// shallower one when the depth has none left (tot.backtracked). A step
// whose tools worked goes one depth deeper. At the depth limit the model
// gives its final answer without tools.
func tot(ctx context.Context, r *run) {
	var stack []*level
	deeper := true
	for {
		if deeper {
			if len(stack) == r.a.cfg.TotDepth {
				r.conclude(ctx)
				return
			}
			lv, err := r.expand(ctx, len(stack)+1)
			if err != nil {
				r.fail(ctx, err)
				return
			}
			stack = append(stack, lv)
		}
		lv := stack[len(stack)-1]
		cand := lv.order[lv.tried]
		lv.tried++
		r.msgs = slices.Clone(lv.base)
		reply, done, why, err := r.pursue(ctx, lv.cands[cand], lv.failed)
		switch {
		case err != nil:
			r.fail(ctx, err)
			return
		case done:
			r.emit(event.RunCompleted{Reason: "final_answer", Reply: reply})
			return
		case why == "":
			deeper = true
			continue
		}
		lv.failed = append(lv.failed, fmt.Sprintf("%q failed: %s", lv.cands[cand], why))
		// Back to the deepest level with an untried candidate.
		for len(stack) > 0 && stack[len(stack)-1].tried == len(stack[len(stack)-1].order) {
			stack = stack[:len(stack)-1]
			if len(stack) > 0 {
				up := stack[len(stack)-1]
				led := up.cands[up.order[up.tried-1]]
				up.failed = append(up.failed, fmt.Sprintf("%q led only to dead ends", led))
			}
		}
		if len(stack) == 0 {
			r.end(ctx, errors.New("every candidate thought failed: the last one because "+why), event.CodeToolError)
			return
		}
		top := stack[len(stack)-1]
		r.emit(event.TotBacktracked{Reason: why, ToDepth: len(stack), Candidate: top.order[top.tried]})
		deeper = false
	}
}

// expandSchema is the structure of the expand step's answer: 1 to n
// candidates.
func expandSchema(n int) *llm.Schema {
	return schema("candidates", fmt.Sprintf(`{"type": "object",
	"properties": {"candidates": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": %d,
		"description": "candidate next steps, each one short sentence"}},
	"required": ["candidates"], "additionalProperties": false}`, n))
}

// evaluateSchema is the structure of the evaluate step's answer: n
// scores from 0 to 1.
func evaluateSchema(n int) *llm.Schema {
	return schema("scores", fmt.Sprintf(`{"type": "object",
	"properties": {"scores": {"type": "array", "items": {"type": "number", "minimum": 0, "maximum": 1}, "minItems": %[1]d, "maxItems": %[1]d,
		"description": "one score per candidate, in their order"}},
	"required": ["scores"], "additionalProperties": false}`, n))
}

// expand proposes and scores the candidates of depth on r.msgs. Without
// usable candidates the model's own words are the one candidate; without
// usable scores the candidates are taken in the order proposed.
func (r *run) expand(ctx context.Context, depth int) (*level, error) {
	n := r.a.cfg.TotBranches
	var cands []string
	if err := r.decide(ctx, r.msgs, step{node: "expand", instruction: fmt.Sprintf(expandInstruction, n), schema: expandSchema(n),
		parse: func(text string) error {
			var out struct {
				Candidates []string `json:"candidates"`
			}
			if err := decodeJSON(text, &out); err != nil {
				return err
			}
			if len(out.Candidates) == 0 || len(out.Candidates) > n {
				return invalid("give between 1 and %d candidates, not %d", n, len(out.Candidates))
			}
			for i, c := range out.Candidates {
				if strings.TrimSpace(c) == "" {
					return invalid("candidate %d is empty", i+1)
				}
			}
			cands = out.Candidates
			return nil
		},
		fallback: func(text string) string {
			if text == "" {
				cands = []string{"Answer the user's last message now."}
				return "the one candidate is to answer now"
			}
			cands = []string{clip(text, maxFallbackChars)}
			return "its own words are the one candidate"
		},
	}); err != nil {
		return nil, err
	}
	r.emit(event.TotExpanded{Candidates: cands, Depth: depth})

	var list strings.Builder
	for i, c := range cands {
		fmt.Fprintf(&list, "%d. %s\n", i+1, c)
	}
	var scores []float64
	if err := r.decide(ctx, r.msgs, step{node: "evaluate", instruction: fmt.Sprintf(evaluateInstruction, list.String()), schema: evaluateSchema(len(cands)),
		parse: func(text string) error {
			var out struct {
				Scores []float64 `json:"scores"`
			}
			if err := decodeJSON(text, &out); err != nil {
				return err
			}
			if len(out.Scores) != len(cands) {
				return invalid("give %d scores, one per candidate, not %d", len(cands), len(out.Scores))
			}
			for i, s := range out.Scores {
				if math.IsNaN(s) || s < 0 || s > 1 {
					return invalid("score %d is %v, out of the range 0 to 1", i+1, s)
				}
			}
			scores = out.Scores
			return nil
		},
		fallback: func(string) string {
			// Equal scores: the stable sort keeps the order proposed.
			scores = make([]float64, len(cands))
			for i := range scores {
				scores[i] = 0.5
			}
			return "the candidates are tried in the order they were proposed"
		},
	}); err != nil {
		return nil, err
	}
	order := make([]int, len(cands))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case scores[a] > scores[b]:
			return -1
		case scores[a] < scores[b]:
			return 1
		}
		return 0
	})
	r.emit(event.TotEvaluated{Chosen: order[0], Scores: scores})
	return &level{cands: cands, order: order, base: slices.Clone(r.msgs)}, nil
}

// pursue takes candidate c (after the failed ones of its depth): one model call with the tools, and their
// round when it calls them. It reports the model's answer when it gave
// one (done), else why the candidate failed ("" when its tools worked).
func (r *run) pursue(ctx context.Context, c string, failed []string) (reply string, done bool, why string, err error) {
	tried := ""
	if len(failed) > 0 {
		tried = "\nThese other steps were tried from here and failed:\n- " + strings.Join(failed, "\n- ")
	}
	base := r.system
	r.system = r.withInstruction(fmt.Sprintf(pursueInstruction, c, tried))
	defer func() { r.system = base }()
	turn, err := r.think(ctx)
	if err != nil {
		return "", false, "", &failure{event.CodeModelError, fmt.Errorf("model error: %w", err)}
	}
	r.msgs = append(r.msgs, turn)
	if len(turn.ToolCalls) == 0 {
		if strings.TrimSpace(turn.Content) == "" {
			return "", false, "the model gave neither an answer nor a tool call", nil
		}
		return turn.Content, true, "", nil
	}
	from := len(r.msgs)
	if err := r.act(ctx, turn.ToolCalls); err != nil {
		return "", false, "", &failure{event.CodeToolError, err}
	}
	if failed, first := toolsFailed(r.msgs[from:]); failed {
		return "", false, "its tool calls failed: " + clip(first, 300), nil
	}
	return "", false, "", nil
}

// conclude asks for the final answer at the depth limit.
func (r *run) conclude(ctx context.Context) {
	r.emit(event.NodeEntered{Node: "think"})
	turn, err := r.stream(ctx, llm.Request{System: r.withInstruction(finalInstruction), Messages: r.msgs}, "")
	exit := event.NodeExited{Node: "think"}
	if err != nil {
		exit.Error = err.Error()
	}
	r.emit(exit)
	if err != nil {
		r.end(ctx, fmt.Errorf("model error: %w", err), event.CodeModelError)
		return
	}
	r.msgs = append(r.msgs, turn)
	r.emit(event.RunCompleted{Reason: "final_answer", Reply: turn.Content})
}
