package server

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"sync"
	"time"

	"github.com/agentwire/agentwire/internal/config"
	"github.com/agentwire/agentwire/internal/llm"
	"github.com/agentwire/agentwire/internal/llm/scripted"
	"github.com/agentwire/agentwire/internal/metrics"
)

// ModelProvider builds a vendor's model from the configuration (cfg.Model
// names it), and a line that describes it for the start-up banner. An
// alias, so that internal/server/providers need not import this package
// (and this package's tests can use it).
type ModelProvider = func(cfg config.Config, log *slog.Logger) (llm.Model, string, error)

// newModel builds the model the configuration chooses, and a line that
// describes it for the start-up banner. The scripted model is built in; a
// vendor's comes from providers, which the binary fills (the package
// internal/server/providers) and a test that starts a server leaves empty,
// so that neither it nor the adapters' tests link the vendors' SDKs.
func newModel(cfg config.Config, log *slog.Logger, providers map[string]ModelProvider) (llm.Model, string, error) {
	p := cfg.Provider()
	if p == "scripted" {
		scn := scripted.Default()
		desc := "scripted (offline, built-in scenario)"
		if cfg.Scenario != "" {
			var err error
			if scn, err = scripted.Load(cfg.Scenario); err != nil {
				return nil, "", err
			}
			desc = "scripted (offline, scenario " + cfg.Scenario + ")"
		}
		opts := []scripted.Option{scripted.WithLogger(log)}
		if cfg.ScenarioPacing == "none" {
			opts = append(opts, scripted.WithPacing(scripted.Pacing{}))
			desc += ", no delays"
		}
		return scripted.New(scn, opts...), desc, nil
	}
	build, ok := providers[p]
	if !ok {
		return nil, "", fmt.Errorf("the %s model is not built into this server (server.Options.Models)", p)
	}
	return build(cfg, log)
}

// modelNamed returns the function that gives a workflow agent the model it
// names: a model of the configured provider by that name, made once per
// name. The scripted model plays the same scenario whatever the name.
func modelNamed(cfg config.Config, log *slog.Logger, base llm.Model, mt *metrics.Metrics, providers map[string]ModelProvider) func(name string) (llm.Model, error) {
	var mu sync.Mutex
	made := map[string]llm.Model{}
	return func(name string) (llm.Model, error) {
		if cfg.Provider() == "scripted" || name == base.Name() {
			return base, nil
		}
		mu.Lock()
		defer mu.Unlock()
		if m, ok := made[name]; ok {
			return m, nil
		}
		c := cfg
		c.Model = name
		m, _, err := newModel(c, log, providers)
		if err != nil {
			return nil, err
		}
		m = observe(m, mt, cfg.Provider())
		made[name] = m
		return m, nil
	}
}

// observed is a model whose calls the server's metrics count: the time to
// its first chunk, its duration and the tokens it reports.
type observed struct {
	llm.Model
	metrics  *metrics.Metrics
	provider string
}

// observe wraps m for metrics; it returns m as it is when there are none.
func observe(m llm.Model, mt *metrics.Metrics, provider string) llm.Model {
	if mt == nil {
		return m
	}
	return observed{Model: m, metrics: mt, provider: provider}
}

func (o observed) Stream(ctx context.Context, req llm.Request) iter.Seq2[llm.Chunk, error] {
	return func(yield func(llm.Chunk, error) bool) {
		start := time.Now()
		var (
			first time.Time
			usage llm.Usage
		)
		defer func() {
			o.metrics.ModelCall(o.provider, o.Model.Name(), start, first, time.Now(), int(usage.PromptTokens), int(usage.CompletionTokens))
		}()
		for ch, err := range o.Model.Stream(ctx, req) {
			if first.IsZero() && err == nil {
				first = time.Now()
			}
			if ch.Type == llm.ChunkUsage {
				usage.PromptTokens += ch.Usage.PromptTokens
				usage.CompletionTokens += ch.Usage.CompletionTokens
			}
			if !yield(ch, err) {
				return
			}
		}
	}
}
