package cli

import (
	"fmt"
	"io"
	"strings"
)

// printer writes a chat's items as plain lines: "assistant: " and the
// text as it streams (pieces appended to the open line), then one line
// per tool call, tool result, notice, error or question. It is the same
// for every protocol, so a person (or a test) reads one format.
type printer struct {
	w      io.Writer
	open   bool   // a message's line is open
	key    string // the open message
	who    string
	broken bool // the open line ends with a newline of the text itself
}

func newPrinter(w io.Writer) *printer { return &printer{w: w} }

// line writes s as a line of its own.
func (p *printer) line(s string) {
	p.endText()
	fmt.Fprintln(p.w, s)
}

// endText ends the open message's line.
func (p *printer) endText() {
	if p.open {
		if !p.broken {
			fmt.Fprintln(p.w)
		}
		p.open, p.key, p.who, p.broken = false, "", "", false
	}
}

func (p *printer) text(who, key, s string) {
	if s == "" {
		return
	}
	if !p.open || p.key != key || p.who != who {
		p.endText()
		fmt.Fprint(p.w, who+": ")
		p.open, p.key, p.who = true, key, who
		s = strings.TrimLeft(s, "\n")
	}
	fmt.Fprint(p.w, s)
	p.broken = strings.HasSuffix(s, "\n")
}

func (p *printer) ask(q question) {
	s := "? " + q.prompt
	switch {
	case len(q.choices) > 0:
		s += " [" + strings.Join(q.choices, " | ") + "]"
	case q.ui:
		s += " (answer with JSON, or text)"
	case q.secret:
		s += " (secret: it shows as you type)"
	}
	p.line(s)
}

// show prints it.
func (p *printer) show(it item) {
	switch it.kind {
	case kText:
		p.text(it.who, it.key, it.text)
	case kTextEnd:
		if it.key == "" || it.key == p.key {
			p.endText()
		}
	case kUser:
		p.line("user: " + it.text)
	case kThinking:
		p.line("thinking: " + oneLine(it.text, 500))
	case kToolCall:
		p.line("tool call: " + it.name + " " + oneLine(it.text, 300))
	case kToolResult:
		outcome := "ok"
		if !it.ok {
			outcome = "failed"
		}
		p.line("tool result: " + it.name + " (" + outcome + "): " + oneLine(it.text, 300))
	case kNotice:
		p.line("notice: " + it.text)
	case kError:
		p.line("error: " + it.text)
	case kAsk:
		p.ask(it.q)
	case kTurnEnd:
		p.endText()
	case kClosed:
		p.endText()
	}
}
