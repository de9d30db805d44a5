// Package workflow loads multi-agent workflows: group chats of named agents
// with their own prompts, tools and models, and a rule for who speaks next.
// Workflows are YAML files in the folder of --workflows, validated against
// schemas/workflow/workflow.schema.json, plus the built-in ones (default: one
// assistant; dev-team: a planner, a coder and a reviewer). The agent
// package's group strategy runs them; docs/WORKFLOWS.md describes the format.
//
// The package knows no protocol and no model: a Workflow is plain data.
package workflow

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Selection is how a group chat chooses its next speaker.
type Selection string

// Speaker selection modes.
const (
	// RoundRobin: the agents in list order, cycling.
	RoundRobin Selection = "round_robin"
	// Auto: the model picks the next agent from the agents' descriptions.
	Auto Selection = "auto"
	// Manual: a person picks, through an input request.
	Manual Selection = "manual"
)

// Defaults of the optional fields.
const (
	DefaultMaxRounds        = 10
	DefaultKeyword          = "TERMINATE"
	DefaultSelectionTimeout = 600 // seconds
	// DefaultName is the workflow a protocol runs when it names none.
	DefaultName = "default"
)

// Reserved words that no agent may be named: an auto selector or a person
// answers them to hand the chat back to the user.
var reserved = []string{"user", "done"}

// Workflow is a loaded, valid workflow.
type Workflow struct {
	// Name is the file name without its extension.
	Name string
	// Source is the file it was loaded from, or "builtin:NAME".
	Source      string
	Description string
	Selection   Selection
	// MaxRounds is the most agent turns in one run.
	MaxRounds int
	// Keyword, in an agent's message, ends the run as terminated; "" never.
	Keyword string
	// After names the agent after whose turn the run completes; "" none.
	After string
	// SelectionTimeoutSeconds bounds a manual selection; 0 waits as long
	// as the run lasts.
	SelectionTimeoutSeconds int
	Agents                  []Agent
}

// Agent is one participant of a workflow.
type Agent struct {
	Name        string
	Description string
	// System is the agent's system prompt; "" is the server's.
	System string
	// Tools are the names of the tools the agent may call: nil is every
	// tool of the run, an empty (non-nil) slice none.
	Tools []string
	// Model is a model name of the server's provider; "" is the run's.
	Model string
}

// Agent returns the agent named name (ignoring case).
func (w *Workflow) Agent(name string) (Agent, bool) {
	for _, a := range w.Agents {
		if strings.EqualFold(a.Name, name) {
			return a, true
		}
	}
	return Agent{}, false
}

// Names lists the agents' names in order.
func (w *Workflow) Names() []string {
	out := make([]string, len(w.Agents))
	for i, a := range w.Agents {
		out[i] = a.Name
	}
	return out
}

// ErrNotFound is the error of Lookup for a name that is no workflow.
var ErrNotFound = errors.New("no workflow has that name")

// ErrInvalid matches every *LoadError (errors.Is): the workflow exists but
// does not load.
var ErrInvalid = errors.New("the workflow does not load")

// LoadError is the error of a workflow file that does not load: its YAML
// does not parse, it breaks the schema, or its parts disagree.
type LoadError struct {
	// Name is the workflow's name, File the file's base name.
	Name, File string
	// Problems are what is wrong, in file order where known.
	Problems []Problem
}

// Problem is one thing wrong with a workflow file.
type Problem struct {
	// Path is the JSON Pointer of the offending field ("" for the file).
	Path string
	// Line is the file line of the field, 0 when unknown.
	Line    int
	Message string
}

func (p Problem) String() string {
	var b strings.Builder
	if p.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", p.Line)
	}
	if p.Path != "" {
		b.WriteString(p.Path + ": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

func (e *LoadError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = e.File + ": " + p.String()
	}
	return fmt.Sprintf("workflow %q does not load: %s", e.Name, strings.Join(parts, "; "))
}

// Is makes errors.Is(err, ErrInvalid) hold.
func (e *LoadError) Is(target error) bool { return target == ErrInvalid }

// workflowName is what workflow names (file names) look like: no dots or
// slashes, so a name never reaches outside the folder.
var workflowName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

// ValidName reports whether name can name a workflow (and so a file).
func ValidName(name string) bool { return workflowName.MatchString(name) }
