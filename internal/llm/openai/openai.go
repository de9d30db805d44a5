// Package openai is an llm.Model on the OpenAI Chat Completions API, through
// the official Go SDK, which builds, sends and retries the requests; the
// streamed reply is read here (decode.go). It speaks to any server with that
// API, given its base URL: OpenAI itself, and equally Ollama, vLLM and
// llama.cpp's server.
package openai

import (
	"context"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/agentwire/agentwire/internal/llm"
)

// DefaultModel is the model requests go to when Config.Model is empty.
const DefaultModel = "gpt-4o-mini"

// DefaultMaxRetries is how often the SDK retries a failed request (rate
// limits, overload, server errors) when Config.MaxRetries is zero.
const DefaultMaxRetries = 2

// Config configures a Model.
type Config struct {
	// APIKey is sent as a bearer token. Local servers (Ollama, vLLM,
	// llama.cpp) need none: leave it empty and no key is sent, unless
	// OPENAI_API_KEY is set, which the SDK reads.
	APIKey string
	// BaseURL is the API's root, such as http://localhost:11434/v1 for
	// Ollama; empty means the SDK's default: OPENAI_BASE_URL if set, else
	// https://api.openai.com/v1. Servers other than api.openai.com get the
	// reply cap as max_tokens, which they all know; OpenAI gets
	// max_completion_tokens, which its reasoning models require.
	BaseURL string
	// Model defaults to DefaultModel.
	Model string
	// HTTPClient defaults to the SDK's client.
	HTTPClient *http.Client
	// MaxTokens caps each reply unless a Request sets its own; zero leaves
	// the server's default.
	MaxTokens int
	// MaxRetries is how often a failed request is retried; zero means
	// DefaultMaxRetries and a negative value means never.
	MaxRetries int
	// Logger defaults to discarding.
	Logger *slog.Logger
}

// Model streams Chat Completions. It is safe for concurrent use.
type Model struct {
	client oai.Client
	model  string
	// maxTokensField is true to send max_tokens, which servers other than
	// OpenAI know, instead of max_completion_tokens, which OpenAI's
	// reasoning models require.
	maxTokensField bool
	maxTokens      int
	// formatRefused: the server answered a request with response_format
	// with 400 naming it; structured answers are asked for in the system
	// prompt from then on.
	formatRefused atomic.Bool
	// ep says where calls go, for errors that say what to change.
	ep  llm.Endpoint
	log *slog.Logger
}

// DefaultBaseURL is where calls go when neither Config.BaseURL nor
// OPENAI_BASE_URL says otherwise.
const DefaultBaseURL = "https://api.openai.com/v1"

var _ llm.Model = (*Model)(nil)

// New returns a Model for cfg.
func New(cfg Config) (*Model, error) {
	m := &Model{model: cfg.Model, maxTokens: cfg.MaxTokens, log: cfg.Logger}
	if m.model == "" {
		m.model = DefaultModel
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxTokens < 0 {
		return nil, fmt.Errorf("openai: MaxTokens %d is negative", cfg.MaxTokens)
	}
	retries := cfg.MaxRetries
	switch {
	case retries == 0:
		retries = DefaultMaxRetries
	case retries < 0:
		retries = 0
	}
	opts := []option.RequestOption{option.WithMaxRetries(retries)}
	m.ep = llm.Endpoint{Provider: "openai", Model: m.model, URL: cfg.BaseURL, URLVar: "OPENAI_BASE_URL", KeyVar: "OPENAI_API_KEY"}
	if m.ep.URL == "" {
		// What the SDK will use.
		if m.ep.URL = os.Getenv("OPENAI_BASE_URL"); m.ep.URL == "" {
			m.ep.URL = DefaultBaseURL
		}
	}
	if cfg.BaseURL != "" {
		u, err := url.Parse(cfg.BaseURL)
		if err != nil || u.Scheme == "" || u.Host == "" {
			return nil, fmt.Errorf("openai: base URL %q is not an absolute URL", cfg.BaseURL)
		}
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
		m.maxTokensField = u.Hostname() != "api.openai.com"
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	m.client = oai.NewClient(opts...)
	return m, nil
}

// refusesFormat reports whether res, the answer to a failed request, is a
// server's refusal of response_format: a 400 (or 422, from servers that
// validate requests with a schema) whose body names it.
func refusesFormat(res *http.Response) bool {
	if res == nil || res.StatusCode != http.StatusBadRequest && res.StatusCode != http.StatusUnprocessableEntity || res.Body == nil {
		return false
	}
	b, err := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	if err != nil {
		return false
	}
	body := strings.ToLower(string(b))
	return strings.Contains(body, "response_format") || strings.Contains(body, "json_schema") || strings.Contains(body, "response format")
}

// Name returns the model requests go to.
func (m *Model) Name() string { return m.model }

// Check lists the server's models, once and without retries, and looks for
// this one: the cheapest call that shows the server is reached, the key
// accepted and the model served. Every OpenAI-compatible server lists its
// models; not all of them answer for one model by name.
func (m *Model) Check(ctx context.Context) error {
	page, err := m.client.Models.List(ctx, option.WithMaxRetries(0))
	if err != nil {
		return llm.ExplainCall(m.ep, err, apiError)
	}
	have := make([]string, 0, len(page.Data))
	for _, model := range page.Data {
		if model.ID == m.model {
			return nil
		}
		have = append(have, model.ID)
	}
	return llm.NoSuchModel(m.ep, have)
}

// Stream sends req as one streamed chat completion.
func (m *Model) Stream(ctx context.Context, req llm.Request) iter.Seq2[llm.Chunk, error] {
	return func(yield func(llm.Chunk, error) bool) {
		format := req.Structured != nil && !m.formatRefused.Load()
		body, err := m.encode(req, format)
		if err != nil {
			yield(llm.Chunk{}, err)
			return
		}
		var res *http.Response
		err = m.client.Post(ctx, "chat/completions", body, &res)
		if err != nil && format && refusesFormat(res) {
			// An OpenAI-compatible server without structured outputs: ask
			// in words, on this call and every later one.
			m.formatRefused.Store(true)
			m.log.Info("openai: the server refuses response_format; structured answers are asked for in the instructions",
				"model", m.model, "err", err)
			if body, err = m.encode(req, false); err != nil {
				yield(llm.Chunk{}, err)
				return
			}
			res = nil
			err = m.client.Post(ctx, "chat/completions", body, &res)
		}
		t := turn{yield: yield}
		stopped := false
		if err == nil {
			defer res.Body.Close()
			err = readStream(res.Body, func(c *completionChunk) bool {
				stopped = !t.chunk(c)
				return !stopped
			})
		}
		if stopped {
			return
		}
		llm.EndStream(ctx, yield, llm.StreamEnd{
			Endpoint: m.ep, Log: m.log,
			Err: err, APIError: apiError,
			Finished: t.finish != "", Before: "the model finished",
			End: func() (llm.FinishReason, llm.Usage, bool) {
				ok := t.end()
				return t.finish, t.usage, ok
			},
		})
	}
}
