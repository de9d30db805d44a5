package scripted

import (
	"strings"
	"text/template"
	"unicode/utf8"

	"github.com/agentwire/agentwire/internal/llm"
)

// text is a scripted string: a literal, or a text/template when it
// contains "{{". Templates see the conversation through the functions of
// funcs, so a reply can quote what the user said or what a tool returned.
type text struct {
	lit  string
	tmpl *template.Template
}

// compileText parses s; name labels errors.
func compileText(name, s string) (text, error) {
	if !strings.Contains(s, "{{") {
		return text{lit: s}, nil
	}
	t, err := template.New(name).Funcs(funcs(&turn{})).Parse(s)
	if err != nil {
		return text{}, err
	}
	return text{tmpl: t}, nil
}

func (t text) empty() bool { return t.tmpl == nil && t.lit == "" }

// render returns the text for one turn.
func (t text) render(tc *turn) (string, error) {
	if t.tmpl == nil {
		return t.lit, nil
	}
	// Funcs binds to the turn, so each render works on its own clone; the
	// compiled template is shared by concurrent streams and never changed.
	c, err := t.tmpl.Clone()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	if err := c.Funcs(funcs(tc)).Execute(&b, nil); err != nil {
		return "", err
	}
	return b.String(), nil
}

// turn is what a request says about the turn to play: the message it
// answers, how many model turns already answered it, and the tool results
// those turns received.
type turn struct {
	user string
	// step counts the assistant messages after the last user message.
	step int
	// results are the tool results after the last user message, in order.
	results []result
	// last are the results after the last assistant message: those of the
	// previous turn.
	last []result
}

type result struct {
	name    string
	content string
	isError bool
}

// readTurn finds the last user message of msgs and what followed it.
func readTurn(msgs []llm.Message) *turn {
	from := 0
	tc := &turn{}
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == llm.RoleUser {
			tc.user = msgs[i].Content
			from = i + 1
			break
		}
	}
	names := map[string]string{} // call id -> tool name
	for _, m := range msgs[from:] {
		switch m.Role {
		case llm.RoleAssistant:
			tc.step++
			tc.last = nil
			for _, c := range m.ToolCalls {
				names[c.ID] = c.Name
			}
		case llm.RoleTool:
			name := m.Name
			if name == "" {
				name = names[m.ToolCallID]
			}
			r := result{name: name, content: m.Content, isError: m.IsError}
			tc.results = append(tc.results, r)
			tc.last = append(tc.last, r)
		}
	}
	return tc
}

// find returns the latest result of the tool called name.
func (tc *turn) find(name string) (result, bool) {
	for i := len(tc.results) - 1; i >= 0; i-- {
		if tc.results[i].name == name {
			return tc.results[i], true
		}
	}
	return result{}, false
}

func (tc *turn) lastResult() result {
	if len(tc.last) == 0 {
		return result{}
	}
	return tc.last[len(tc.last)-1]
}

// funcs are the template functions, bound to tc.
func funcs(tc *turn) template.FuncMap {
	return template.FuncMap{
		// user_message is the text of the last user message.
		"user_message": func() string { return tc.user },
		// last_tool_result is the content of the last tool result the
		// previous turn received.
		"last_tool_result": func() string { return tc.lastResult().content },
		// last_tool_error reports whether that result was a failure.
		"last_tool_error": func() bool { return tc.lastResult().isError },
		// tool_result is the latest result of the named tool since the
		// user's message.
		"tool_result": func(name string) string { r, _ := tc.find(name); return r.content },
		// tool_error reports whether that result was a failure.
		"tool_error": func(name string) bool { r, _ := tc.find(name); return r.isError },
		// lines splits s into its non-blank lines.
		"lines": func(s string) []string {
			var out []string
			for l := range strings.Lines(s) {
				if l = strings.TrimRight(l, "\r\n"); strings.TrimSpace(l) != "" {
					out = append(out, l)
				}
			}
			return out
		},
		// entries are the entries of an ls result: its lines, and none
		// for the note an empty folder gets ("(. is empty)").
		"entries": func(s string) []string {
			t := strings.TrimSpace(s)
			if strings.HasPrefix(t, "(") && strings.HasSuffix(t, " is empty)") && !strings.Contains(t, "\n") {
				return nil
			}
			var out []string
			for l := range strings.Lines(s) {
				if l = strings.TrimRight(l, "\r\n"); strings.TrimSpace(l) != "" {
					out = append(out, l)
				}
			}
			return out
		},
		// plural is one when n is 1, else many.
		"plural": func(n int, one, many string) string {
			if n == 1 {
				return one
			}
			return many
		},
		// truncate shortens s to n characters, marking the cut with "…".
		"truncate": func(n int, s string) string {
			if utf8.RuneCountInString(s) <= n {
				return s
			}
			r := []rune(s)
			return string(r[:max(n, 0)]) + "…"
		},
	}
}
