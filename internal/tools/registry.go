package tools

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Bounded is implemented by tools that know the most powerful effect any of
// their calls can have. Registry.Filter offers only tools bounded to
// EffectRead under the read-only policy; a tool that is not Bounded is
// taken to be able to run commands.
type Bounded interface {
	MaxEffect() Effect
}

// MaxEffect returns the most powerful effect a call of t can have.
func MaxEffect(t Tool) Effect {
	if b, ok := t.(Bounded); ok {
		return b.MaxEffect()
	}
	return EffectCommand
}

// Registry is a set of tools by name. It is safe for concurrent use.
type Registry struct {
	mu     sync.RWMutex
	byName map[string]Tool
}

// NewRegistry returns a registry of ts; it fails as Register does.
func NewRegistry(ts ...Tool) (*Registry, error) {
	r := &Registry{byName: make(map[string]Tool, len(ts))}
	for _, t := range ts {
		if err := r.Register(t); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Register adds t. Names must be non-empty, made of letters, digits, '_'
// and '-' (what every model provider accepts), and unique.
func (r *Registry) Register(t Tool) error {
	name := t.Spec().Name
	if !validName(name) {
		return fmt.Errorf("tools: invalid tool name %q", name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byName == nil {
		r.byName = make(map[string]Tool)
	}
	if _, dup := r.byName[name]; dup {
		return fmt.Errorf("tools: %q is already registered", name)
	}
	r.byName[name] = t
	return nil
}

func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	return strings.IndexFunc(s, func(c rune) bool {
		return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-')
	}) < 0
}

// Get returns the tool called name.
func (r *Registry) Get(name string) (Tool, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.byName[name]
	return t, ok
}

// Names returns the tools' names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.byName))
	for n := range r.byName {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Specs returns the tools' specs sorted by name, so that a model sees the
// same list (and a provider's prompt cache hits) on every call.
func (r *Registry) Specs() []Spec {
	names := r.Names()
	specs := make([]Spec, 0, len(names))
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, n := range names {
		if t, ok := r.byName[n]; ok {
			specs = append(specs, t.Spec())
		}
	}
	return specs
}

// Filter returns a new registry of the tools that p lets the model see:
// under PolicyReadOnly only tools bounded to EffectRead (so neither the file
// editors, nor bash, nor web_fetcher); under every other policy all of
// them.
func (r *Registry) Filter(p Policy) *Registry {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := &Registry{byName: make(map[string]Tool, len(r.byName))}
	for n, t := range r.byName {
		if p == PolicyReadOnly && MaxEffect(t) != EffectRead {
			continue
		}
		out.byName[n] = t
	}
	return out
}
