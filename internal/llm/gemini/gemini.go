// Package gemini is an llm.Model on the Gemini API's streamGenerateContent,
// through Google's official Go SDK (google.golang.org/genai). Gemini sends
// each function call whole; the package turns it into the start, delta and
// done chunks the llm contract asks for, and numbers calls the API leaves
// without an id.
package gemini

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"net/http"
	"os"

	"google.golang.org/genai"

	"github.com/agentwire/agentwire/internal/llm"
)

// DefaultModel is the model requests go to when Config.Model is empty.
const DefaultModel = "gemini-2.5-flash"

// DefaultMaxRetries is how often a failed request (408, 429, 5xx, network
// errors) is retried when Config.MaxRetries is zero.
const DefaultMaxRetries = 2

// Config configures a Model.
type Config struct {
	// APIKey is sent as x-goog-api-key; empty leaves the SDK to read
	// GOOGLE_API_KEY or GEMINI_API_KEY.
	APIKey string
	// BaseURL defaults to the SDK's: GOOGLE_GEMINI_BASE_URL if set, else
	// https://generativelanguage.googleapis.com/.
	BaseURL string
	// Model defaults to DefaultModel.
	Model string
	// HTTPClient defaults to a new http.Client.
	HTTPClient *http.Client
	// MaxTokens caps each reply unless a Request sets its own; zero leaves
	// the model's default.
	MaxTokens int
	// IncludeThoughts asks for summaries of the model's thinking, which
	// stream as reasoning.
	IncludeThoughts bool
	// MaxRetries is how often a failed request is retried; zero means
	// DefaultMaxRetries and a negative value means never.
	MaxRetries int
	// Logger defaults to discarding.
	Logger *slog.Logger
}

// Model streams generated content. It is safe for concurrent use.
type Model struct {
	client    *genai.Client
	model     string
	maxTokens int
	thoughts  bool
	// retry is sent with every request; nil retries nothing.
	retry *genai.HTTPRetryOptions
	// ep says where calls go, for errors that say what to change.
	ep  llm.Endpoint
	log *slog.Logger
}

// DefaultBaseURL is where calls go when neither Config.BaseURL nor
// GOOGLE_GEMINI_BASE_URL, which the SDK reads, says otherwise.
const DefaultBaseURL = "https://generativelanguage.googleapis.com"

var _ llm.Model = (*Model)(nil)

// New returns a Model for cfg.
func New(cfg Config) (*Model, error) {
	m := &Model{model: cfg.Model, maxTokens: cfg.MaxTokens, thoughts: cfg.IncludeThoughts, log: cfg.Logger}
	if m.model == "" {
		m.model = DefaultModel
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxTokens < 0 {
		return nil, fmt.Errorf("gemini: MaxTokens %d is negative", cfg.MaxTokens)
	}
	retries := cfg.MaxRetries
	if retries == 0 {
		retries = DefaultMaxRetries
	}
	if retries > 0 {
		attempts := int32(retries + 1)
		m.retry = &genai.HTTPRetryOptions{Attempts: &attempts}
	}
	// The context is used only to find Google Cloud credentials, which
	// the Gemini API backend does not use.
	client, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		APIKey:      cfg.APIKey,
		Backend:     genai.BackendGeminiAPI,
		HTTPClient:  cfg.HTTPClient,
		HTTPOptions: genai.HTTPOptions{BaseURL: cfg.BaseURL},
	})
	if err != nil {
		return nil, fmt.Errorf("gemini: %w", err)
	}
	m.client = client
	m.ep = llm.Endpoint{Provider: "gemini", Model: m.model, URL: cfg.BaseURL, KeyVar: "GEMINI_API_KEY"}
	if m.ep.URL == "" {
		m.ep.URL = DefaultBaseURL
		if u := os.Getenv("GOOGLE_GEMINI_BASE_URL"); u != "" {
			m.ep.URL, m.ep.URLVar = u, "GOOGLE_GEMINI_BASE_URL"
		}
	}
	return m, nil
}

// Name returns the model requests go to.
func (m *Model) Name() string { return m.model }

// Check asks the API for this model, once and without retries: the
// cheapest call that shows the API is reached, the key accepted and the
// model known.
func (m *Model) Check(ctx context.Context) error {
	_, err := m.client.Models.Get(ctx, m.model, &genai.GetModelConfig{HTTPOptions: &genai.HTTPOptions{}})
	return llm.ExplainCall(m.ep, err, apiError)
}

// Stream sends req as one streamed generateContent call.
func (m *Model) Stream(ctx context.Context, req llm.Request) iter.Seq2[llm.Chunk, error] {
	return func(yield func(llm.Chunk, error) bool) {
		contents, config, err := m.request(req)
		if err != nil {
			yield(llm.Chunk{}, err)
			return
		}
		t := turn{yield: yield}
		var streamErr error
		for resp, err := range m.client.Models.GenerateContentStream(ctx, m.model, contents, config) {
			if err != nil {
				streamErr = err
				break
			}
			if !t.response(resp) {
				return
			}
		}
		llm.EndStream(ctx, yield, llm.StreamEnd{
			Endpoint: m.ep, Log: m.log,
			Err: streamErr, APIError: apiError,
			Finished: t.finish != "", Before: "the model finished",
			End: func() (llm.FinishReason, llm.Usage, bool) {
				ok := t.end()
				return t.finish, t.usage, ok
			},
		})
	}
}
