package workflow

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
	"gopkg.in/yaml.v3"

	schemas "github.com/agentwire/agentwire/schemas/workflow"
)

//go:embed builtin/*.yaml
var builtinFS embed.FS

// Catalog is the workflows a server offers: the files of its folder and
// the built-in ones, which a file of the same name replaces. Files are read
// at each Lookup, so an edited workflow applies to the next run without a
// restart. A Catalog is safe for concurrent use.
type Catalog struct {
	dir     string
	builtin map[string]*Workflow
}

// New returns the catalog of dir's workflows and the built-in ones; dir ""
// offers only the built-in ones. dir must be a folder. Files that do not
// load do not fail New: Lookup reports them (and Check lists them).
func New(dir string) (*Catalog, error) {
	c := &Catalog{dir: dir, builtin: map[string]*Workflow{}}
	if dir != "" {
		st, err := os.Stat(dir)
		if err != nil {
			return nil, fmt.Errorf("workflows folder: %w", err)
		}
		if !st.IsDir() {
			return nil, fmt.Errorf("workflows folder %s is not a folder", dir)
		}
	}
	files, err := fs.Glob(builtinFS, "builtin/*.yaml")
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		data, err := builtinFS.ReadFile(f)
		if err != nil {
			return nil, err
		}
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		w, err := Parse(name, filepath.Base(f), data)
		if err != nil {
			return nil, fmt.Errorf("built-in workflow: %w", err)
		}
		w.Source = "builtin:" + name
		c.builtin[name] = w
	}
	return c, nil
}

// Lookup returns the workflow called name. Its error is ErrNotFound
// (wrapped) when there is no such workflow, a *LoadError when its file
// does not load, or another error when the file cannot be read.
func (c *Catalog) Lookup(name string) (*Workflow, error) {
	if !ValidName(name) {
		return nil, fmt.Errorf("workflow %q: %w", name, ErrNotFound)
	}
	if c.dir != "" {
		for _, ext := range []string{".yaml", ".yml"} {
			path := filepath.Join(c.dir, name+ext)
			data, err := os.ReadFile(path)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("workflow %q: %w", name, err)
			}
			w, err := Parse(name, filepath.Base(path), data)
			if err != nil {
				return nil, err
			}
			w.Source = path
			return w, nil
		}
	}
	if w, ok := c.builtin[name]; ok {
		return w.clone(), nil
	}
	return nil, fmt.Errorf("workflow %q: %w", name, ErrNotFound)
}

// Names lists the workflows on offer, sorted: the folder's and the
// built-in ones, whether or not they load.
func (c *Catalog) Names() []string {
	names := map[string]bool{}
	for n := range c.builtin {
		names[n] = true
	}
	for _, f := range c.files() {
		names[strings.TrimSuffix(strings.TrimSuffix(filepath.Base(f), ".yaml"), ".yml")] = true
	}
	return slices.Sorted(maps.Keys(names))
}

// Check loads every workflow of the folder and returns the errors of those
// that do not load, for the server to log at start.
func (c *Catalog) Check() []error {
	var errs []error
	for _, n := range c.Names() {
		if _, err := c.Lookup(n); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// files are the folder's workflow files with valid names.
func (c *Catalog) files() []string {
	if c.dir == "" {
		return nil
	}
	entries, err := os.ReadDir(c.dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		ext := filepath.Ext(e.Name())
		if e.IsDir() || (ext != ".yaml" && ext != ".yml") || !ValidName(strings.TrimSuffix(e.Name(), ext)) {
			continue
		}
		out = append(out, filepath.Join(c.dir, e.Name()))
	}
	return out
}

func (w *Workflow) clone() *Workflow {
	c := *w
	c.Agents = slices.Clone(w.Agents)
	for i := range c.Agents {
		if c.Agents[i].Tools != nil {
			c.Agents[i].Tools = slices.Clone(c.Agents[i].Tools)
		}
	}
	return &c
}

// fileFormat is the YAML of a workflow file, as the schema allows it.
type fileFormat struct {
	Description             string    `yaml:"description"`
	SpeakerSelection        Selection `yaml:"speaker_selection"`
	MaxRounds               int       `yaml:"max_rounds"`
	SelectionTimeoutSeconds *int      `yaml:"selection_timeout_seconds"`
	Termination             struct {
		Keyword *string `yaml:"keyword"`
		After   string  `yaml:"after"`
	} `yaml:"termination"`
	Agents []struct {
		Name        string    `yaml:"name"`
		Description string    `yaml:"description"`
		System      string    `yaml:"system"`
		Tools       *[]string `yaml:"tools"`
		Model       string    `yaml:"model"`
	} `yaml:"agents"`
}

var schema = func() *jsonschema.Schema {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemas.Schema))
	if err != nil {
		panic(err)
	}
	c := jsonschema.NewCompiler()
	const url = "workflow.schema.json"
	if err := c.AddResource(url, doc); err != nil {
		panic(err)
	}
	return c.MustCompile(url)
}()

var printer = message.NewPrinter(language.English)

// Parse loads the workflow called name from data, the content of file
// (a base name, for errors): YAML, valid against the schema, whose agents'
// names are unique and whose termination names one of them.
func Parse(name, file string, data []byte) (*Workflow, error) {
	fail := func(ps ...Problem) error { return &LoadError{Name: name, File: file, Problems: ps} }
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fail(Problem{Message: strings.TrimPrefix(err.Error(), "yaml: ")})
	}
	if len(doc.Content) == 0 {
		return nil, fail(Problem{Message: "the file is empty; a workflow needs at least agents"})
	}
	root := doc.Content[0]
	var raw any
	if err := root.Decode(&raw); err != nil {
		return nil, fail(Problem{Message: strings.TrimPrefix(err.Error(), "yaml: ")})
	}
	js, err := json.Marshal(raw)
	if err != nil {
		return nil, fail(Problem{Message: "not a JSON-compatible document (mapping keys must be strings): " + err.Error()})
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(js))
	if err != nil {
		return nil, fail(Problem{Message: err.Error()})
	}
	if err := schema.Validate(inst); err != nil {
		var ve *jsonschema.ValidationError
		if !errors.As(err, &ve) {
			return nil, fail(Problem{Message: err.Error()})
		}
		var ps []Problem
		for _, leaf := range leaves(ve) {
			ps = append(ps, Problem{Path: pointer(leaf.InstanceLocation), Line: lineOf(root, leaf.InstanceLocation),
				Message: leaf.ErrorKind.LocalizedString(printer)})
		}
		slices.SortStableFunc(ps, func(a, b Problem) int { return a.Line - b.Line })
		return nil, fail(ps...)
	}
	var f fileFormat
	if err := root.Decode(&f); err != nil {
		return nil, fail(Problem{Message: strings.TrimPrefix(err.Error(), "yaml: ")})
	}
	w := &Workflow{
		Name: name, Description: f.Description, Selection: f.SpeakerSelection, MaxRounds: f.MaxRounds,
		Keyword: DefaultKeyword, After: f.Termination.After, SelectionTimeoutSeconds: DefaultSelectionTimeout,
	}
	if w.Selection == "" {
		w.Selection = RoundRobin
	}
	if w.MaxRounds == 0 {
		w.MaxRounds = DefaultMaxRounds
	}
	if f.Termination.Keyword != nil {
		w.Keyword = *f.Termination.Keyword
	}
	if f.SelectionTimeoutSeconds != nil {
		w.SelectionTimeoutSeconds = *f.SelectionTimeoutSeconds
	}
	var ps []Problem
	seen := map[string]int{}
	for i, a := range f.Agents {
		path := []string{"agents", strconv.Itoa(i), "name"}
		key := strings.ToLower(a.Name)
		if slices.Contains(reserved, key) {
			ps = append(ps, Problem{Path: pointer(path), Line: lineOf(root, path),
				Message: fmt.Sprintf("%q is reserved (it hands the chat back to the user); name the agent otherwise", a.Name)})
		}
		if j, dup := seen[key]; dup {
			ps = append(ps, Problem{Path: pointer(path), Line: lineOf(root, path),
				Message: fmt.Sprintf("agent %q is named like agent %d; names must be unique, ignoring case", a.Name, j)})
		}
		seen[key] = i
		ag := Agent{Name: a.Name, Description: strings.TrimSpace(a.Description), System: a.System, Model: a.Model}
		if a.Tools != nil {
			ag.Tools = append([]string{}, *a.Tools...)
		}
		w.Agents = append(w.Agents, ag)
	}
	if w.After != "" {
		if a, ok := w.Agent(w.After); ok {
			w.After = a.Name
		} else {
			path := []string{"termination", "after"}
			ps = append(ps, Problem{Path: pointer(path), Line: lineOf(root, path),
				Message: fmt.Sprintf("%q is not an agent of the workflow (its agents: %s)", w.After, strings.Join(w.Names(), ", "))})
		}
	}
	if len(ps) > 0 {
		return nil, fail(ps...)
	}
	return w, nil
}

// leaves returns the innermost errors of a validation error: the ones that
// say what is wrong where.
func leaves(ve *jsonschema.ValidationError) []*jsonschema.ValidationError {
	if len(ve.Causes) == 0 {
		return []*jsonschema.ValidationError{ve}
	}
	var out []*jsonschema.ValidationError
	for _, c := range ve.Causes {
		out = append(out, leaves(c)...)
	}
	return out
}

// pointer is the JSON Pointer of a path.
func pointer(path []string) string {
	if len(path) == 0 {
		return "/"
	}
	var b strings.Builder
	for _, p := range path {
		b.WriteString("/" + strings.ReplaceAll(strings.ReplaceAll(p, "~", "~0"), "/", "~1"))
	}
	return b.String()
}

// lineOf returns the line of the value at path under n, or of the deepest
// value on the way that exists.
func lineOf(n *yaml.Node, path []string) int {
	for _, p := range path {
		var next *yaml.Node
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == p {
					next = n.Content[i+1]
					break
				}
			}
		case yaml.SequenceNode:
			if i, err := strconv.Atoi(p); err == nil && i >= 0 && i < len(n.Content) {
				next = n.Content[i]
			}
		}
		if next == nil {
			break
		}
		n = next
	}
	return n.Line
}
