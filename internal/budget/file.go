// Package budget limits what each principal may spend on models: tokens
// and cost (USD) per day and per month, as a budgets file (--budgets)
// sets them. Before each model call of a run the agent asks a Checker
// whether the run's principal, the owner of its thread, has budget left;
// what the principal spent is summed from the usage events of its threads
// in the store (store.Spending), so every node sharing the store holds
// the principal to the same budget, and what was spent survives restarts.
//
// The file is read in file.go, the windows are in window.go, and the check
// is in check.go.
package budget

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// Default is the principals entry for every principal without one of its
// own.
const Default = "*"

// Limits are one principal's budgets; a nil limit is no limit, and a
// limit of 0 allows nothing.
type Limits struct {
	TokensPerDay   *int64   `yaml:"tokens_per_day"`
	TokensPerMonth *int64   `yaml:"tokens_per_month"`
	CostPerDay     *float64 `yaml:"cost_per_day"`
	CostPerMonth   *float64 `yaml:"cost_per_month"`
}

// none reports whether l limits nothing.
func (l Limits) none() bool {
	return l.TokensPerDay == nil && l.TokensPerMonth == nil && l.CostPerDay == nil && l.CostPerMonth == nil
}

// Price is what a model costs, in USD per million tokens.
type Price struct {
	Input  float64 `yaml:"input"`
	Output float64 `yaml:"output"`
}

// Budgets is a loaded budgets file.
type Budgets struct {
	principals map[string]Limits
	prices     map[string]Price
}

// file is the budgets file as written.
type file struct {
	Principals map[string]Limits `yaml:"principals"`
	Prices     map[string]Price  `yaml:"prices"`
}

// Load reads the budgets file at path (YAML, or JSON, which is YAML too).
func Load(path string) (*Budgets, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--budgets: %w", err)
	}
	bs, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("--budgets %s: %w", path, err)
	}
	return bs, nil
}

// Parse reads a budgets file's text. Unknown keys, negative numbers, an empty principal name and cost limits without prices are
// errors: a budget that is not what its writer meant must not be
// enforced as something else.
func Parse(b []byte) (*Budgets, error) {
	var f file
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if len(f.Principals) == 0 {
		return nil, errors.New(`it sets no budgets: give "principals", with "*" for everyone or principals by name`)
	}
	costs := false
	for _, name := range slices.Sorted(maps.Keys(f.Principals)) {
		l := f.Principals[name]
		if strings.TrimSpace(name) == "" {
			return nil, errors.New("principals: a principal's name is empty")
		}
		for limit, v := range map[string]*int64{"tokens_per_day": l.TokensPerDay, "tokens_per_month": l.TokensPerMonth} {
			if v != nil && *v < 0 {
				return nil, fmt.Errorf("principals: %q: %s is negative", name, limit)
			}
		}
		for limit, v := range map[string]*float64{"cost_per_day": l.CostPerDay, "cost_per_month": l.CostPerMonth} {
			if v != nil && (*v < 0 || math.IsNaN(*v) || math.IsInf(*v, 0)) {
				return nil, fmt.Errorf("principals: %q: %s must be a number of USD, 0 or more", name, limit)
			}
			costs = costs || v != nil
		}
	}
	for name, p := range f.Prices {
		if strings.TrimSpace(name) == "" {
			return nil, errors.New("prices: a model's name is empty")
		}
		if p.Input < 0 || p.Output < 0 || math.IsNaN(p.Input+p.Output) || math.IsInf(p.Input+p.Output, 0) {
			return nil, fmt.Errorf("prices: %q: input and output must be USD per million tokens, 0 or more", name)
		}
	}
	if costs && len(f.Prices) == 0 {
		return nil, errors.New(`a cost limit is set but "prices" is empty: give the models' prices (USD per million input and output tokens), with "*" for any other model`)
	}
	return &Budgets{principals: f.Principals, prices: f.Prices}, nil
}

// Limits returns principal's limits: its own entry, else the "*" entry;
// ok is false when neither limits anything.
func (b *Budgets) Limits(principal string) (l Limits, ok bool) {
	l, ok = b.principals[principal]
	if !ok {
		l = b.principals[Default]
	}
	return l, !l.none()
}

// Cost is the cost in USD of a call to model that read prompt tokens and
// wrote completion tokens, rounded to a millionth of a dollar. The model's
// price is its own entry, else the longest entry that is a prefix of its
// name followed by "-" or ":" (gpt-4o-2024-08-06 takes gpt-4o's), else
// the "*" entry; a model with none costs 0.
func (b *Budgets) Cost(model string, prompt, completion int64) float64 {
	p, ok := b.price(model)
	if !ok {
		return 0
	}
	c := (float64(prompt)*p.Input + float64(completion)*p.Output) / 1e6
	return math.Round(c*1e6) / 1e6
}

func (b *Budgets) price(model string) (Price, bool) {
	if p, ok := b.prices[model]; ok {
		return p, true
	}
	best := ""
	for name := range b.prices {
		if name != Default && len(name) > len(best) &&
			(strings.HasPrefix(model, name+"-") || strings.HasPrefix(model, name+":")) {
			best = name
		}
	}
	if best != "" {
		return b.prices[best], true
	}
	p, ok := b.prices[Default]
	return p, ok
}
