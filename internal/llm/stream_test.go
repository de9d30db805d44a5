package llm_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/llm"
)

var errRateLimited = errors.New("429 Too Many Requests")

// apiError plays a provider's mapping: only errRateLimited is the API's.
func apiError(err error) *llm.APIError {
	if errors.Is(err, errRateLimited) {
		return &llm.APIError{Provider: "acme", StatusCode: 429, Message: "slow down", Err: err}
	}
	return nil
}

// endStream runs llm.EndStream on e, with a finished turn of usage 3+4
// unless e says otherwise, and returns what it yielded, whether End ran and
// what it logged. stopAt is the number of chunks the consumer takes before
// stopping; -1 takes them all.
func endStream(t *testing.T, ctx context.Context, e llm.StreamEnd, stopAt int) (chunks []llm.Chunk, errs []error, ended bool, log string) {
	t.Helper()
	var buf bytes.Buffer
	e.Endpoint = llm.Endpoint{Provider: "acme", Model: "acme-1", URL: "https://acme.test/v1", URLVar: "ACME_BASE_URL", KeyVar: "ACME_API_KEY"}
	e.Log = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug, ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
	e.APIError = apiError
	yield := func(c llm.Chunk, err error) bool {
		if err != nil {
			errs = append(errs, err)
			return false
		}
		if stopAt >= 0 && len(chunks) == stopAt {
			return false
		}
		chunks = append(chunks, c)
		return true
	}
	e.End = func() (llm.FinishReason, llm.Usage, bool) {
		ended = true
		u := llm.Usage{PromptTokens: 3, CompletionTokens: 4}
		ok := yield(llm.Chunk{Type: llm.ChunkUsage, Usage: u}, nil) &&
			yield(llm.Chunk{Type: llm.ChunkFinish, Finish: llm.FinishStop}, nil)
		return llm.FinishStop, u, ok
	}
	llm.EndStream(ctx, yield, e)
	return chunks, errs, ended, buf.String()
}

func TestEndStreamFinishedTurn(t *testing.T) {
	chunks, errs, ended, log := endStream(t, t.Context(), llm.StreamEnd{Finished: true, Before: "the model finished"}, -1)
	assert.Empty(t, errs)
	assert.True(t, ended)
	assert.Equal(t, []llm.Chunk{
		{Type: llm.ChunkUsage, Usage: llm.Usage{PromptTokens: 3, CompletionTokens: 4}},
		{Type: llm.ChunkFinish, Finish: llm.FinishStop},
	}, chunks)
	assert.Equal(t, "level=DEBUG msg=\"model call done\" provider=acme model=acme-1 finish=stop prompt_tokens=3 completion_tokens=4\n", log)
}

func TestEndStreamConsumerStopsAtTheEnd(t *testing.T) {
	chunks, errs, ended, log := endStream(t, t.Context(), llm.StreamEnd{Finished: true}, 1)
	assert.Empty(t, errs)
	assert.True(t, ended)
	assert.Len(t, chunks, 1)
	assert.Empty(t, log, "a turn the consumer stopped reading is not logged as done")
}

func TestEndStreamErrors(t *testing.T) {
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		end  llm.StreamEnd
		want func(t *testing.T, err error)
		// logged is what the log says of the failure; "" for nothing.
		logged string
	}{{
		name: "the API's error, explained",
		ctx:  t.Context(),
		end:  llm.StreamEnd{Err: errRateLimited, Finished: true},
		want: func(t *testing.T, err error) {
			var a *llm.APIError
			require.ErrorAs(t, err, &a)
			assert.Equal(t, `acme model "acme-1" at https://acme.test/v1 is limiting requests (429 slow down): wait a little and try again, or check the account's quota`, err.Error())
		},
		logged: `level=WARN msg="model call failed" provider=acme model=acme-1 url=https://acme.test/v1 err="429 Too Many Requests"`,
	}, {
		name: "another error, explained",
		ctx:  t.Context(),
		end:  llm.StreamEnd{Err: io.ErrClosedPipe, Finished: true},
		want: func(t *testing.T, err error) {
			assert.ErrorIs(t, err, io.ErrClosedPipe)
			assert.Equal(t, `acme model "acme-1" at https://acme.test/v1 failed: io: read/write on closed pipe`, err.Error())
		},
		logged: `level=WARN msg="model call failed" provider=acme model=acme-1 url=https://acme.test/v1 err="io: read/write on closed pipe"`,
	}, {
		name: "the stream's error once ctx is done",
		ctx:  cancelled,
		end:  llm.StreamEnd{Err: errRateLimited},
		want: func(t *testing.T, err error) { assert.Equal(t, context.Canceled, err) },
	}, {
		name: "ctx done, no stream error",
		ctx:  cancelled,
		end:  llm.StreamEnd{Finished: true},
		want: func(t *testing.T, err error) { assert.Equal(t, context.Canceled, err) },
	}, {
		name: "ended early",
		ctx:  t.Context(),
		end:  llm.StreamEnd{Before: "the message stopped"},
		want: func(t *testing.T, err error) {
			assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
			assert.Equal(t, "acme: the stream ended before the message stopped: unexpected EOF", err.Error())
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			chunks, errs, ended, log := endStream(t, tc.ctx, tc.end, -1)
			assert.Empty(t, chunks)
			assert.False(t, ended)
			if tc.logged == "" {
				assert.Empty(t, log)
			} else {
				assert.Equal(t, tc.logged+"\n", log)
			}
			require.Len(t, errs, 1)
			tc.want(t, errs[0])
		})
	}
}
