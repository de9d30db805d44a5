// Package providers holds what the binary builds into the server beyond the
// scripted model and the in-process bus: the vendors' models (OpenAI and
// compatible servers, Anthropic, Gemini) and the NATS bus of a cluster. It
// lives apart from internal/server so that a test that starts a server
// links the vendors' SDKs and the NATS client only when it asks for them:
// cmd/server passes Models() and NATS in server.Options.
package providers

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/agentwire/agentwire/internal/bus"
	busnats "github.com/agentwire/agentwire/internal/bus/nats"
	"github.com/agentwire/agentwire/internal/config"
	"github.com/agentwire/agentwire/internal/llm"
	"github.com/agentwire/agentwire/internal/llm/anthropic"
	"github.com/agentwire/agentwire/internal/llm/gemini"
	"github.com/agentwire/agentwire/internal/llm/openai"
)

// Models are the vendors' models, by the name --llm gives them: what
// server.Options.Models takes.
func Models() map[string]func(config.Config, *slog.Logger) (llm.Model, string, error) {
	return map[string]func(config.Config, *slog.Logger) (llm.Model, string, error){
		"openai": OpenAI, "anthropic": Anthropic, "gemini": Gemini,
	}
}

// OpenAI builds a model of OpenAI, or of the OpenAI-compatible server at
// cfg.OpenAIBaseURL.
func OpenAI(cfg config.Config, log *slog.Logger) (llm.Model, string, error) {
	m, err := openai.New(openai.Config{APIKey: cfg.OpenAIAPIKey, BaseURL: cfg.OpenAIBaseURL, Model: cfg.Model, Logger: log})
	if err != nil {
		return nil, "", err
	}
	where := "OpenAI"
	if cfg.OpenAIBaseURL != "" {
		where = cfg.OpenAIBaseURL
	}
	return m, fmt.Sprintf("openai %s at %s", m.Name(), where), nil
}

// Anthropic builds a model of Anthropic's.
func Anthropic(cfg config.Config, log *slog.Logger) (llm.Model, string, error) {
	m, err := anthropic.New(anthropic.Config{APIKey: cfg.AnthropicAPIKey, Model: cfg.Model, Logger: log})
	if err != nil {
		return nil, "", err
	}
	return m, "anthropic " + m.Name(), nil
}

// Gemini builds a model of Google's Gemini.
func Gemini(cfg config.Config, log *slog.Logger) (llm.Model, string, error) {
	m, err := gemini.New(gemini.Config{APIKey: cfg.GeminiAPIKey, Model: cfg.Model, Logger: log})
	if err != nil {
		return nil, "", err
	}
	return m, "gemini " + m.Name(), nil
}

// NATS connects a node to the NATS server at url, naming the connection
// after the node: what server.Options.Cluster takes.
func NATS(ctx context.Context, url, node string, log *slog.Logger) (bus.Bus, func() bool, error) {
	b, err := busnats.Open(ctx, url, busnats.Options{Name: node, Logger: log})
	if err != nil {
		return nil, nil, err
	}
	return b, b.Connected, nil
}
