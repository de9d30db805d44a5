package scripted

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// The file* types mirror the YAML scenario format field by field (see
// docs/SCENARIOS.md). They are decoded with unknown fields rejected, so a
// misspelt key is an error instead of a silently ignored line, and then
// compiled into the types of scenario.go.

type fileScenario struct {
	Name        string      `yaml:"name"`
	Description string      `yaml:"description"`
	Pacing      *filePacing `yaml:"pacing"`
	Rules       []fileRule  `yaml:"rules"`
}

type filePacing struct {
	StartDelay *duration `yaml:"start_delay"`
	ChunkDelay *duration `yaml:"chunk_delay"`
}

type fileRule struct {
	Name   string      `yaml:"name"`
	Match  *fileMatch  `yaml:"match"`
	Pacing *filePacing `yaml:"pacing"`
	Steps  []fileStep  `yaml:"steps"`
}

type fileMatch struct {
	Contains stringList `yaml:"contains"`
	Regex    string     `yaml:"regex"`
	Exact    *string    `yaml:"exact"`
	System   string     `yaml:"system"`
}

type fileStep struct {
	Reasoning          string      `yaml:"reasoning"`
	ReasoningSignature string      `yaml:"reasoning_signature"`
	Text               string      `yaml:"text"`
	Chunk              int         `yaml:"chunk"`
	ToolCalls          []fileCall  `yaml:"tool_calls"`
	Usage              *fileUsage  `yaml:"usage"`
	Finish             string      `yaml:"finish"`
	Error              string      `yaml:"error"`
	Pacing             *filePacing `yaml:"pacing"`
}

type fileCall struct {
	ID        string    `yaml:"id"`
	Name      string    `yaml:"name"`
	Arguments yaml.Node `yaml:"arguments"`
	Chunk     int       `yaml:"chunk"`
}

type fileUsage struct {
	PromptTokens     *int64 `yaml:"prompt_tokens"`
	CompletionTokens *int64 `yaml:"completion_tokens"`
}

// stringList is a YAML scalar or a sequence of scalars.
type stringList []string

func (l *stringList) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		*l = stringList{n.Value}
		return nil
	case yaml.SequenceNode:
		var s []string
		if err := n.Decode(&s); err != nil {
			return err
		}
		*l = s
		return nil
	}
	return fmt.Errorf("line %d: want a string or a list of strings", n.Line)
}

// duration is a Go duration string ("250ms", "1s"); a bare 0 means none.
type duration time.Duration

func (d *duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: want a duration such as 20ms", n.Line)
	}
	if n.Value == "0" {
		*d = 0
		return nil
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil || v < 0 {
		return fmt.Errorf("line %d: %q is not a duration such as 20ms", n.Line, n.Value)
	}
	*d = duration(v)
	return nil
}

// ParseError is a problem in a scenario file, at a line when it is known.
type ParseError struct {
	File string
	// Line is 1-based; zero when the problem belongs to no single line.
	Line    int
	Message string
}

// Error formats the problem as "file:line: message".
func (e *ParseError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Message)
}

var (
	yamlLine     = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)
	unknownField = regexp.MustCompile(`^field (\S+) not found in type \S+$`)
)

// yamlErrors turns a yaml.v3 error into ParseErrors for file, one per
// problem, with the line the library reported.
func yamlErrors(file string, err error) error {
	var msgs []string
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs = te.Errors
	} else {
		msgs = []string{err.Error()}
	}
	var errs []error
	for _, m := range msgs {
		pe := &ParseError{File: file, Message: strings.TrimPrefix(m, "yaml: ")}
		if g := yamlLine.FindStringSubmatch(m); g != nil {
			pe.Line, _ = strconv.Atoi(g[1])
			pe.Message = g[2]
		}
		if g := unknownField.FindStringSubmatch(pe.Message); g != nil {
			pe.Message = "unknown field " + strconv.Quote(g[1])
		}
		errs = append(errs, pe)
	}
	return errors.Join(errs...)
}

// positions records where the rules, steps and tool calls of a scenario
// file start, so that errors found after decoding can name a line.
type positions struct {
	rules [][]stepLines
	rule  []int
}

type stepLines struct {
	step  int
	calls []int
}

// lineMap walks the document node of a scenario file.
func lineMap(doc *yaml.Node) positions {
	var l positions
	root := doc
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = root.Content[0]
	}
	for _, r := range items(child(root, "rules")) {
		l.rule = append(l.rule, r.Line)
		var steps []stepLines
		for _, s := range items(child(r, "steps")) {
			sl := stepLines{step: s.Line}
			for _, c := range items(child(s, "tool_calls")) {
				sl.calls = append(sl.calls, c.Line)
			}
			steps = append(steps, sl)
		}
		l.rules = append(l.rules, steps)
	}
	return l
}

func (l positions) ruleLine(i int) int {
	if i < len(l.rule) {
		return l.rule[i]
	}
	return 0
}

func (l positions) stepLine(i, j int) int {
	if i < len(l.rules) && j < len(l.rules[i]) {
		return l.rules[i][j].step
	}
	return l.ruleLine(i)
}

func (l positions) callLine(i, j, k int) int {
	if i < len(l.rules) && j < len(l.rules[i]) && k < len(l.rules[i][j].calls) {
		return l.rules[i][j].calls[k]
	}
	return l.stepLine(i, j)
}

// child returns the value of key in mapping n, or nil.
func child(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// items returns the elements of sequence n, or nil.
func items(n *yaml.Node) []*yaml.Node {
	if n == nil || n.Kind != yaml.SequenceNode {
		return nil
	}
	return n.Content
}

// lineError is an error that knows the line of the file it belongs to.
type lineError struct {
	line int
	err  error
}

func (e *lineError) Error() string { return e.err.Error() }
func (e *lineError) Unwrap() error { return e.err }

// at attaches line to err.
func at(line int, err error) error { return &lineError{line: line, err: err} }

// lineOf returns the innermost line attached to err, or def.
func lineOf(err error, def int) int {
	for err != nil {
		if le, ok := err.(*lineError); ok {
			def = le.line
		}
		err = errors.Unwrap(err)
	}
	return def
}
