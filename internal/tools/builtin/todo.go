package builtin

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/agentwire/agentwire/internal/tools"
)

// todoItem is one entry of the model's to-do list.
type todoItem struct {
	ID       string `json:"id,omitempty"`
	Content  string `json:"content"`
	Status   string `json:"status"`
	Priority string `json:"priority,omitempty"`
}

// todoList is the model's plan, kept between calls. It touches no file, so
// writing it is a read as far as approval goes.
type todoList struct {
	mu    sync.Mutex
	items []todoItem
}

func (l *todoList) render() string {
	if len(l.items) == 0 {
		return "(the to-do list is empty)"
	}
	mark := map[string]string{"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}
	var b strings.Builder
	for i, it := range l.items {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%s %s", mark[it.Status], it.Content)
		if it.ID != "" {
			fmt.Fprintf(&b, " (id %s)", it.ID)
		}
		if it.Priority != "" {
			fmt.Fprintf(&b, " [%s]", it.Priority)
		}
	}
	return b.String()
}

type todoWriteArgs struct {
	Todos []todoItem `json:"todos"`
}

func todoWriteTool(l *todoList) tools.Tool {
	return &tool[todoWriteArgs]{
		name: "todo_write",
		desc: "Replace your to-do list for this task with the given items; use it to plan multi-step work and mark progress.",
		schema: `{"type":"object","properties":{"todos":{"type":"array","items":{"type":"object","properties":{` +
			`"id":{"type":"string"},"content":{"type":"string"},` +
			`"status":{"type":"string","enum":["pending","in_progress","completed"]},` +
			`"priority":{"type":"string","enum":["high","medium","low"]}},` +
			`"required":["content","status"],"additionalProperties":false}}},` +
			`"required":["todos"],"additionalProperties":false}`,
		max: tools.EffectRead,
		run: func(_ context.Context, a todoWriteArgs, _ tools.Output) (tools.Result, error) {
			for i, it := range a.Todos {
				switch it.Status {
				case "pending", "in_progress", "completed":
				default:
					return failf("todo %d: status must be pending, in_progress or completed, not %q", i+1, it.Status), nil
				}
				if strings.TrimSpace(it.Content) == "" {
					return failf("todo %d: content is empty", i+1), nil
				}
			}
			l.mu.Lock()
			defer l.mu.Unlock()
			l.items = append([]todoItem(nil), a.Todos...)
			return ok("%s", l.render()), nil
		},
	}
}

func todoReadTool(l *todoList) tools.Tool {
	return &tool[struct{}]{
		name:   "todo_read",
		desc:   "Show your to-do list for this task.",
		schema: `{"type":"object","properties":{},"additionalProperties":false}`,
		max:    tools.EffectRead,
		run: func(context.Context, struct{}, tools.Output) (tools.Result, error) {
			l.mu.Lock()
			defer l.mu.Unlock()
			return ok("%s", l.render()), nil
		},
	}
}
