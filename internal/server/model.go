package server

import (
	"fmt"
	"log/slog"
	"sync"

	"github.com/agentwire/agentwire/internal/config"
	"github.com/agentwire/agentwire/internal/llm"
	"github.com/agentwire/agentwire/internal/llm/anthropic"
	"github.com/agentwire/agentwire/internal/llm/gemini"
	"github.com/agentwire/agentwire/internal/llm/openai"
	"github.com/agentwire/agentwire/internal/llm/scripted"
)

// newModel builds the model the configuration chooses, and a line that
// describes it for the start-up banner.
func newModel(cfg config.Config, log *slog.Logger) (llm.Model, string, error) {
	switch p := cfg.Provider(); p {
	case "openai":
		m, err := openai.New(openai.Config{APIKey: cfg.OpenAIAPIKey, BaseURL: cfg.OpenAIBaseURL, Model: cfg.Model, Logger: log})
		if err != nil {
			return nil, "", err
		}
		where := "OpenAI"
		if cfg.OpenAIBaseURL != "" {
			where = cfg.OpenAIBaseURL
		}
		return m, fmt.Sprintf("openai %s at %s", m.Name(), where), nil
	case "anthropic":
		m, err := anthropic.New(anthropic.Config{APIKey: cfg.AnthropicAPIKey, Model: cfg.Model, Logger: log})
		if err != nil {
			return nil, "", err
		}
		return m, "anthropic " + m.Name(), nil
	case "gemini":
		m, err := gemini.New(gemini.Config{APIKey: cfg.GeminiAPIKey, Model: cfg.Model, Logger: log})
		if err != nil {
			return nil, "", err
		}
		return m, "gemini " + m.Name(), nil
	default:
		scn := scripted.Default()
		desc := "scripted (offline, built-in scenario)"
		if cfg.Scenario != "" {
			var err error
			if scn, err = scripted.Load(cfg.Scenario); err != nil {
				return nil, "", err
			}
			desc = "scripted (offline, scenario " + cfg.Scenario + ")"
		}
		return scripted.New(scn, scripted.WithLogger(log)), desc, nil
	}
}

// modelNamed returns the function that gives a workflow agent the model it
// names: a model of the configured provider by that name, made once per
// name. The scripted model plays the same scenario whatever the name.
func modelNamed(cfg config.Config, log *slog.Logger, base llm.Model) func(name string) (llm.Model, error) {
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
		m, _, err := newModel(c, log)
		if err != nil {
			return nil, err
		}
		made[name] = m
		return m, nil
	}
}
