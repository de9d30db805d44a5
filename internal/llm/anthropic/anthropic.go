// Package anthropic is an llm.Model on Anthropic's Messages API, through the
// official Go SDK: streamed text, tool use and extended thinking, whose
// signed blocks go back to the API in later requests.
package anthropic

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"net/http"
	"os"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/agentwire/agentwire/internal/llm"
)

// DefaultModel is the model requests go to when Config.Model is empty.
const DefaultModel = sdk.ModelClaudeSonnet4_6

// DefaultMaxTokens caps a reply when neither the Config nor the Request
// does: the Messages API requires a cap.
const DefaultMaxTokens = 8192

// DefaultMaxRetries is how often the SDK retries a failed request (rate
// limits, overload, server errors) when Config.MaxRetries is zero.
const DefaultMaxRetries = 2

// Config configures a Model.
type Config struct {
	// APIKey is sent as x-api-key; empty leaves the SDK to find credentials
	// (ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN, its profiles).
	APIKey string
	// BaseURL defaults to the SDK's: ANTHROPIC_BASE_URL if set, else
	// https://api.anthropic.com.
	BaseURL string
	// Model defaults to DefaultModel.
	Model string
	// HTTPClient defaults to the SDK's client.
	HTTPClient *http.Client
	// MaxTokens caps each reply unless a Request sets its own; zero means
	// DefaultMaxTokens.
	MaxTokens int
	// ThinkingBudget turns on extended thinking with this many tokens for
	// it (at least 1024, and below the reply's cap, which includes it); zero
	// leaves thinking off. A call whose cap is not above the budget runs
	// without thinking.
	ThinkingBudget int
	// AdaptiveThinking lets the model decide how much to think, for models
	// that support it; it takes precedence over ThinkingBudget.
	AdaptiveThinking bool
	// MaxRetries is how often a failed request is retried; zero means
	// DefaultMaxRetries and a negative value means never.
	MaxRetries int
	// Logger defaults to discarding.
	Logger *slog.Logger
}

// Model streams Messages. It is safe for concurrent use.
type Model struct {
	client    sdk.Client
	model     string
	maxTokens int
	budget    int
	adaptive  bool
	// ep says where calls go, for errors that say what to change.
	ep  llm.Endpoint
	log *slog.Logger
}

// DefaultBaseURL is where calls go when neither Config.BaseURL nor
// ANTHROPIC_BASE_URL, which the SDK reads, says otherwise.
const DefaultBaseURL = "https://api.anthropic.com"

var _ llm.Model = (*Model)(nil)

// New returns a Model for cfg.
func New(cfg Config) (*Model, error) {
	m := &Model{model: cfg.Model, maxTokens: cfg.MaxTokens, budget: cfg.ThinkingBudget, adaptive: cfg.AdaptiveThinking, log: cfg.Logger}
	if m.model == "" {
		m.model = DefaultModel
	}
	if m.maxTokens == 0 {
		m.maxTokens = DefaultMaxTokens
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	switch {
	case cfg.MaxTokens < 0:
		return nil, fmt.Errorf("anthropic: MaxTokens %d is negative", cfg.MaxTokens)
	case cfg.ThinkingBudget != 0 && cfg.ThinkingBudget < 1024:
		return nil, fmt.Errorf("anthropic: ThinkingBudget %d is below the API's minimum of 1024", cfg.ThinkingBudget)
	case !cfg.AdaptiveThinking && cfg.ThinkingBudget >= m.maxTokens:
		return nil, fmt.Errorf("anthropic: ThinkingBudget %d must be below MaxTokens %d", cfg.ThinkingBudget, m.maxTokens)
	}
	retries := cfg.MaxRetries
	switch {
	case retries == 0:
		retries = DefaultMaxRetries
	case retries < 0:
		retries = 0
	}
	opts := []option.RequestOption{option.WithMaxRetries(retries)}
	m.ep = llm.Endpoint{Provider: "anthropic", Model: m.model, URL: cfg.BaseURL, KeyVar: "ANTHROPIC_API_KEY"}
	if m.ep.URL == "" {
		m.ep.URL = DefaultBaseURL
		if u := os.Getenv("ANTHROPIC_BASE_URL"); u != "" {
			m.ep.URL, m.ep.URLVar = u, "ANTHROPIC_BASE_URL"
		}
	}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	m.client = sdk.NewClient(opts...)
	return m, nil
}

// Name returns the model requests go to.
func (m *Model) Name() string { return m.model }

// Check asks the API for this model, once and without retries: the
// cheapest call that shows the API is reached, the key accepted and the
// model known (aliases included).
func (m *Model) Check(ctx context.Context) error {
	_, err := m.client.Models.Get(ctx, m.model, sdk.ModelGetParams{}, option.WithMaxRetries(0))
	return llm.ExplainCall(m.ep, err, apiError)
}

// Stream sends req as one streamed message.
func (m *Model) Stream(ctx context.Context, req llm.Request) iter.Seq2[llm.Chunk, error] {
	return func(yield func(llm.Chunk, error) bool) {
		params, err := m.params(req)
		if err != nil {
			yield(llm.Chunk{}, err)
			return
		}
		stream := m.client.Messages.NewStreaming(ctx, params)
		defer stream.Close()
		t := turn{yield: yield, log: m.log}
		if req.Structured != nil {
			t.structured = req.Structured.Name
		}
		for stream.Next() {
			if !t.event(ctx, stream.Current()) {
				return
			}
			if t.stopped {
				break
			}
		}
		llm.EndStream(ctx, yield, llm.StreamEnd{
			Endpoint: m.ep, Log: m.log,
			Err: stream.Err(), APIError: apiError,
			Finished: t.stopped, Before: "the message stopped",
			End: func() (llm.FinishReason, llm.Usage, bool) {
				ok := t.end()
				return t.finish, t.usage, ok
			},
		})
	}
}
