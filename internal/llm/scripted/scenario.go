package scripted

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/agentwire/agentwire/internal/llm"
)

// Scenario is a compiled, validated script: rules that match the user's
// message and the model turns each one plays. Make one with Parse, Load or
// Default; it is immutable and safe to share between Models.
type Scenario struct {
	name  string
	rules []*rule
}

// Name is the scenario's name ("" when the file gives none).
func (s *Scenario) Name() string { return s.name }

// Pacing is how fast a turn streams. Zero values stream without delay.
type Pacing struct {
	// StartDelay passes before the first chunk of a turn (time to first
	// token).
	StartDelay time.Duration
	// ChunkDelay passes before every later text, reasoning and argument
	// fragment.
	ChunkDelay time.Duration
}

// pacing is a partial Pacing: unset fields inherit from the enclosing level
// (scenario, rule, step).
type pacing struct {
	start, chunk *time.Duration
}

func compilePacing(p *filePacing) pacing {
	if p == nil {
		return pacing{}
	}
	return pacing{start: (*time.Duration)(p.StartDelay), chunk: (*time.Duration)(p.ChunkDelay)}
}

// over returns p with the fields o sets replaced.
func (p pacing) over(o pacing) pacing {
	if o.start != nil {
		p.start = o.start
	}
	if o.chunk != nil {
		p.chunk = o.chunk
	}
	return p
}

func (p pacing) resolve() Pacing {
	var r Pacing
	if p.start != nil {
		r.StartDelay = *p.start
	}
	if p.chunk != nil {
		r.ChunkDelay = *p.chunk
	}
	return r
}

type rule struct {
	name  string
	where string // "file:line", for logs
	// match is nil for a fallback rule.
	match  *matcher
	pacing pacing // the file's pacing with the rule's over it
	steps  []*step
}

type matcher struct {
	contains []string // lower-cased; any one matches
	regex    *regexp.Regexp
	exact    *string
	system   string // lower-cased
}

// matches reports whether every condition of m holds for the request.
func (m *matcher) matches(user, system string) bool {
	if len(m.contains) > 0 {
		lu := strings.ToLower(user)
		if !slices.ContainsFunc(m.contains, func(s string) bool { return strings.Contains(lu, s) }) {
			return false
		}
	}
	if m.regex != nil && !m.regex.MatchString(user) {
		return false
	}
	if m.exact != nil && strings.TrimSpace(user) != strings.TrimSpace(*m.exact) {
		return false
	}
	if m.system != "" && !strings.Contains(strings.ToLower(system), m.system) {
		return false
	}
	return true
}

type step struct {
	reasoning text
	signature string
	text      text
	chunk     int
	calls     []call
	usage     *fileUsage
	finish    llm.FinishReason
	err       text
	pacing    pacing
}

type call struct {
	id    string
	name  string
	args  args
	chunk int
}

var finishes = []llm.FinishReason{llm.FinishStop, llm.FinishToolCalls, llm.FinishLength, llm.FinishFiltered, llm.FinishOther}

// Parse compiles one scenario from YAML. file names the source in errors,
// which are *ParseError values (joined when there are several) giving the
// line of each problem.
func Parse(file string, data []byte) (*Scenario, error) {
	var fs fileScenario
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&fs); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &ParseError{File: file, Message: "empty scenario"}
		}
		return nil, yamlErrors(file, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, &ParseError{File: file, Line: extra.Line, Message: "a scenario file holds one YAML document"}
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, yamlErrors(file, err)
	}
	return compile(file, &fs, lineMap(&doc))
}

func compile(file string, fs *fileScenario, ln positions) (*Scenario, error) {
	var errs []error
	fail := func(line int, format string, a ...any) {
		errs = append(errs, &ParseError{File: file, Line: line, Message: fmt.Sprintf(format, a...)})
	}
	if len(fs.Rules) == 0 {
		fail(0, "no rules")
	}
	base := compilePacing(fs.Pacing)
	s := &Scenario{name: fs.Name}
	for i, fr := range fs.Rules {
		label := fmt.Sprintf("rule %d", i+1)
		if fr.Name != "" {
			label = fmt.Sprintf("rule %q", fr.Name)
		}
		r := &rule{
			name:   fr.Name,
			where:  fmt.Sprintf("%s:%d", file, ln.ruleLine(i)),
			pacing: base.over(compilePacing(fr.Pacing)),
		}
		if r.name == "" {
			r.name = fmt.Sprintf("#%d", i+1)
		}
		if fm := fr.Match; fm != nil {
			m := &matcher{exact: fm.Exact, system: strings.ToLower(fm.System)}
			for _, c := range fm.Contains {
				m.contains = append(m.contains, strings.ToLower(c))
			}
			if fm.Regex != "" {
				re, err := regexp.Compile(fm.Regex)
				if err != nil {
					fail(ln.ruleLine(i), "%s: match.regex: %v", label, err)
				}
				m.regex = re
			}
			if len(m.contains) == 0 && fm.Regex == "" && m.exact == nil && m.system == "" {
				fail(ln.ruleLine(i), "%s: match needs contains, regex, exact or system (leave match out for a fallback rule)", label)
			}
			r.match = m
		}
		if len(fr.Steps) == 0 {
			fail(ln.ruleLine(i), "%s: no steps", label)
		}
		for j, fst := range fr.Steps {
			line := ln.stepLine(i, j)
			where := fmt.Sprintf("%s step %d", label, j+1)
			st, err := compileStep(where, &fst, func(k int) int { return ln.callLine(i, j, k) })
			if err != nil {
				fail(lineOf(err, line), "%s: %v", where, err)
				continue
			}
			r.steps = append(r.steps, st)
		}
		s.rules = append(s.rules, r)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return s, nil
}

func compileStep(where string, fs *fileStep, callLine func(int) int) (*step, error) {
	st := &step{signature: fs.ReasoningSignature, chunk: fs.Chunk, usage: fs.Usage, pacing: compilePacing(fs.Pacing)}
	var err error
	if st.reasoning, err = compileText(where+" reasoning", fs.Reasoning); err != nil {
		return nil, err
	}
	if st.text, err = compileText(where+" text", fs.Text); err != nil {
		return nil, err
	}
	if st.err, err = compileText(where+" error", fs.Error); err != nil {
		return nil, err
	}
	if fs.Chunk < -1 {
		return nil, fmt.Errorf("chunk %d: want a positive number of characters, 0 for word by word or -1 for whole", fs.Chunk)
	}
	if fs.Finish != "" {
		st.finish = llm.FinishReason(fs.Finish)
		if !slices.Contains(finishes, st.finish) {
			return nil, fmt.Errorf("finish %q: want one of %v", fs.Finish, finishes)
		}
	}
	if fs.Usage != nil && (fs.Usage.PromptTokens != nil && *fs.Usage.PromptTokens < 0 || fs.Usage.CompletionTokens != nil && *fs.Usage.CompletionTokens < 0) {
		return nil, errors.New("usage: token counts cannot be negative")
	}
	if !st.err.empty() && (len(fs.ToolCalls) > 0 || fs.Finish != "" || fs.Usage != nil) {
		return nil, errors.New("an error step ends the stream after its reasoning and text: it takes no tool_calls, finish or usage")
	}
	if st.reasoning.empty() && st.text.empty() && st.err.empty() && len(fs.ToolCalls) == 0 {
		return nil, errors.New("empty step: give text, reasoning, tool_calls or error")
	}
	for k, fc := range fs.ToolCalls {
		if fc.Name == "" {
			return nil, at(callLine(k), fmt.Errorf("tool call %d: no name", k+1))
		}
		if fc.Chunk < -1 {
			return nil, at(callLine(k), fmt.Errorf("tool call %d: chunk %d: want a positive number of characters, 0 for the default or -1 for whole", k+1, fc.Chunk))
		}
		a, err := compileArgs(&fc.Arguments, fmt.Sprintf("%s %s arguments", where, fc.Name))
		if err != nil {
			return nil, at(callLine(k), fmt.Errorf("tool call %d (%s): %w", k+1, fc.Name, err))
		}
		st.calls = append(st.calls, call{id: fc.ID, name: fc.Name, args: a, chunk: fc.Chunk})
	}
	return st, nil
}

// Load reads a scenario file, or every *.yaml and *.yml file of a folder
// merged in file-name order: the rules of the first file come first, and
// each file's pacing applies to its own rules. A merged scenario is named
// after the folder.
func Load(path string) (*Scenario, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		if s, ok := Builtin(path); ok {
			return s, nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	if !fi.IsDir() {
		return loadFile(path)
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	merged := &Scenario{name: filepath.Base(filepath.Clean(path))}
	var errs []error
	for _, e := range entries { // ReadDir sorts by file name
		ext := filepath.Ext(e.Name())
		if e.IsDir() || ext != ".yaml" && ext != ".yml" {
			continue
		}
		s, err := loadFile(filepath.Join(path, e.Name()))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		merged.rules = append(merged.rules, s.rules...)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if len(merged.rules) == 0 {
		return nil, &ParseError{File: path, Message: "no *.yaml or *.yml scenario files in the folder"}
	}
	return merged, nil
}

func loadFile(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	return Parse(path, data)
}

// Must returns s, and panics if err is not nil; for scenarios that are part
// of a program or a test, like template.Must.
func Must(s *Scenario, err error) *Scenario {
	if err != nil {
		panic(err)
	}
	return s
}

//go:embed default.yaml
var defaultYAML []byte

//go:embed ag2-tour.yaml
var ag2TourYAML []byte

//go:embed agentchat-tour.yaml
var agentchatTourYAML []byte

//go:embed threads-tour.yaml
var threadsTourYAML []byte

//go:embed loom-tour.yaml
var loomTourYAML []byte

//go:embed agentloop-tour.yaml
var agentloopTourYAML []byte

// builtins are the scenarios Load finds by name when no file has it.
var builtins = map[string][]byte{
	"ag2-tour":       ag2TourYAML,
	"agentchat-tour": agentchatTourYAML,
	"threads-tour":   threadsTourYAML,
	"loom-tour":      loomTourYAML,
	"agentloop-tour": agentloopTourYAML,
}

// Tours are the built-in tours, one a protocol: each drives its
// protocol's server frames, every type its document lists that a run can
// produce (docs/SCENARIOS.md).
var Tours = []string{"ag2-tour", "agentchat-tour", "threads-tour", "loom-tour", "agentloop-tour"}

// Builtin returns the built-in scenario of that name: one of Tours.
func Builtin(name string) (*Scenario, bool) {
	b, ok := builtins[name]
	if !ok {
		return nil, false
	}
	return Must(Parse(name+".yaml", b)), true
}

// Default returns the built-in scenario a server runs when no model is
// configured: it says so and how to configure one, lists the working
// folder when asked, and plays a demo of every kind of model output on
// request ("demo tools", "demo approval", ...; see docs/SCENARIOS.md).
func Default() *Scenario {
	s := Must(Parse("default.yaml", defaultYAML))
	// "demo ag2 tour" plays the ag2-tour scenario, "agentchat tour" the
	// agentchat-tour one, and so on: the tours' rules come after the
	// default's, whose phrases they avoid.
	for _, name := range Tours {
		tour, _ := Builtin(name)
		s.rules = append(s.rules, tour.rules...)
	}
	return s
}
