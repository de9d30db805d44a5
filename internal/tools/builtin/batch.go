package builtin

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentwire/agentwire/internal/tools"
)

const batchMaxCalls = 20

type batchCall struct {
	Tool string          `json:"tool"`
	Args json.RawMessage `json:"args"`
}

type batchArgs struct {
	Calls []batchCall `json:"calls"`
}

// batchTool runs several calls of the registry's other tools in one. Its
// class has a part per call, so the policy judges each.
func batchTool(reg *tools.Registry) tools.Tool {
	return &tool[batchArgs]{
		name: "batch",
		desc: fmt.Sprintf("Run up to %d calls of the other tools in one step, in order; each result is reported.", batchMaxCalls),
		schema: fmt.Sprintf(`{"type":"object","properties":{"calls":{"type":"array","minItems":1,"maxItems":%d,"items":{"type":"object","properties":{`+
			`"tool":{"type":"string","description":"A tool's name"},"args":{"type":"object","description":"That tool's arguments"}},`+
			`"required":["tool","args"],"additionalProperties":false}}},"required":["calls"],"additionalProperties":false}`, batchMaxCalls),
		max:      tools.EffectCommand,
		classify: func(a batchArgs) tools.Class { return classifyBatch(reg, a.Calls) },
		run: func(ctx context.Context, a batchArgs, out tools.Output) (tools.Result, error) {
			if len(a.Calls) == 0 || len(a.Calls) > batchMaxCalls {
				return failf("calls must hold 1 to %d calls", batchMaxCalls), nil
			}
			var b strings.Builder
			failed := 0
			for i, c := range a.Calls {
				res, err := runPart(ctx, reg, c, out)
				if err != nil {
					if ctx.Err() != nil {
						return tools.Result{}, ctx.Err()
					}
					res = fail(err)
				}
				status := "ok"
				if res.IsError {
					status, failed = "error", failed+1
				}
				fmt.Fprintf(&b, "[%d] %s (%s):\n%s\n\n", i+1, c.Tool, status, res.Content)
			}
			return tools.Result{Content: strings.TrimSuffix(b.String(), "\n\n"), IsError: failed == len(a.Calls)}, nil
		},
	}
}

func runPart(ctx context.Context, reg *tools.Registry, c batchCall, out tools.Output) (tools.Result, error) {
	if c.Tool == "batch" {
		return failf("a batch cannot contain a batch"), nil
	}
	t, ok := reg.Get(c.Tool)
	if !ok {
		return failf("unknown tool %q", c.Tool), nil
	}
	return t.Run(ctx, c.Args, out)
}

// classifyBatch classifies each call and sums them up conservatively (see
// tools.Class.Parts).
func classifyBatch(reg *tools.Registry, calls []batchCall) tools.Class {
	sum := tools.Class{Effect: tools.EffectRead}
	keys := map[string]bool{}
	commands, patches, roOnly := 0, 0, true
	for _, c := range calls {
		part := tools.Class{Effect: tools.EffectRead} // unknown tools and nested batches fail without effect
		if t, ok := reg.Get(c.Tool); ok && c.Tool != "batch" {
			part = t.Classify(c.Args)
		}
		sum.Parts = append(sum.Parts, part)
		sum.Effect = max(sum.Effect, part.Effect)
		if part.Effect == tools.EffectRead {
			continue
		}
		if len(part.Command) > 0 {
			commands++
			sum.Command = part.Command
		}
		if part.Patch != "" {
			patches++
			sum.Patch = part.Patch
		}
		if part.Effect == tools.EffectCommand && part.ReadOnlyCommand {
			continue
		}
		roOnly = false
		keys[part.Key] = true
	}
	if commands != 1 {
		sum.Command = nil
	}
	if patches != 1 {
		sum.Patch = ""
	}
	sum.ReadOnlyCommand = sum.Effect == tools.EffectCommand && roOnly
	if len(keys) == 1 {
		for k := range keys {
			sum.Key = k
		}
	}
	return sum
}
