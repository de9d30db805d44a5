package ag2

import (
	_ "embed"
	"fmt"
	"math"
	"os"
	"strings"

	"gopkg.in/yaml.v3"
)

//go:embed prices.yaml
var builtinPrices []byte

// price is what a model costs, in USD per million tokens.
type price struct {
	Prompt     float64 `yaml:"prompt"`
	Completion float64 `yaml:"completion"`
}

// prices is a price table by model name.
type prices struct {
	Models map[string]price `yaml:"models"`
}

// loadPrices reads the price table of file, or the built-in one when file
// is "".
func loadPrices(file string) (*prices, error) {
	b := builtinPrices
	if file != "" {
		var err error
		if b, err = os.ReadFile(file); err != nil {
			return nil, fmt.Errorf("--prices: %w", err)
		}
	}
	var p prices
	if err := yaml.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("--prices %s: %w", file, err)
	}
	for m, pr := range p.Models {
		if pr.Prompt < 0 || pr.Completion < 0 || math.IsNaN(pr.Prompt+pr.Completion) {
			return nil, fmt.Errorf("--prices %s: model %q has a negative price", file, m)
		}
	}
	return &p, nil
}

// cost is the cost in USD of the tokens on model, rounded to a millionth
// of a dollar; false when the table has no price for the model.
func (p *prices) cost(model string, prompt, completion int64) (float64, bool) {
	if p == nil {
		return 0, false
	}
	pr, ok := p.Models[model]
	if !ok {
		best := ""
		for name := range p.Models {
			if (strings.HasPrefix(model, name+"-") || strings.HasPrefix(model, name+":")) && len(name) > len(best) {
				best = name
			}
		}
		if best == "" {
			return 0, false
		}
		pr = p.Models[best]
	}
	c := (float64(prompt)*pr.Prompt + float64(completion)*pr.Completion) / 1e6
	return math.Round(c*1e6) / 1e6, true
}
