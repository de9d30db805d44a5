package ag2

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/generated/ag2api"
	"github.com/agentwire/agentwire/internal/event"
)

func TestPricesMatchByNameThenLongestPrefix(t *testing.T) {
	p, err := loadPrices("")
	require.NoError(t, err)
	c, ok := p.cost("gpt-4o-mini-2024-07-18", 1_000_000, 1_000_000)
	require.True(t, ok)
	assert.InDelta(t, 0.15+0.60, c, 1e-9, "gpt-4o-mini, not gpt-4o")
	c, ok = p.cost("gpt-4o", 2_000_000, 0)
	require.True(t, ok)
	assert.InDelta(t, 5.0, c, 1e-9)
	_, ok = p.cost("scripted:ag2", 1, 1)
	assert.True(t, ok)
	_, ok = p.cost("gpt-4ox", 1, 1)
	assert.False(t, ok, "a prefix counts only before - or :")
	_, ok = p.cost("mystery", 1, 1)
	assert.False(t, ok)
	var none *prices
	_, ok = none.cost("gpt-4o", 1, 1)
	assert.False(t, ok)
}

func TestPricesFileIsChecked(t *testing.T) {
	_, err := loadPrices("testdata/no-such-prices.yaml")
	assert.ErrorContains(t, err, "--prices")
}

func TestDecisionsIgnoreCaseAndSpacing(t *testing.T) {
	for text, want := range map[string]event.Decision{
		"approve": event.DecisionApprove, " Y ": event.DecisionApprove, "YES": event.DecisionApprove,
		"approve   ALWAYS": event.DecisionApproveAlways, "no": event.DecisionDenyContinue, "N": event.DecisionDenyContinue,
		"deny": event.DecisionDenyContinue, "Deny and stop": event.DecisionDenyStop,
	} {
		d, ok := parseDecision(text)
		assert.True(t, ok, text)
		assert.Equal(t, want, d, text)
	}
	for _, text := range []string{"", "ok", "yes please", "approved", "stop"} {
		_, ok := parseDecision(text)
		assert.False(t, ok, text)
	}
}

func TestClampPercent(t *testing.T) {
	assert.Equal(t, 0.0, clampPercent(-5))
	assert.Equal(t, 100.0, clampPercent(250))
	assert.Equal(t, 42.5, clampPercent(42.5))
	assert.Equal(t, 0.0, clampPercent(math.NaN()))
}

func TestCoalesceMergesContiguousChunksOfOneMessage(t *testing.T) {
	pr := func(seq int, corr, content string) frame {
		return frame{seq: int64(seq), msg: ag2api.NewPrint(ag2api.PrintData{ChatID: "c", Agent: "a", Content: content, Corr: new(corr), Seq: seq})}
	}
	text := frame{seq: 4, msg: ag2api.NewText(ag2api.TextData{ChatID: "c", Agent: "a", Content: "x", Seq: 4})}
	out := coalesce([]frame{pr(1, "m1", "Hel"), pr(2, "m1", "lo"), pr(3, "m2", "!"), text, pr(5, "m1", "again")})
	require.Len(t, out, 4)
	first := out[0].msg.(ag2api.Print).Data
	assert.Equal(t, "Hello", first.Content)
	assert.Equal(t, 2, first.Seq)
	assert.Equal(t, int64(2), out[0].seq)
	assert.Equal(t, "!", out[1].msg.(ag2api.Print).Data.Content)
	assert.Equal(t, "again", out[3].msg.(ag2api.Print).Data.Content, "chunks are merged only when contiguous")
}

func TestEnvelopeAddsTimestampAndReplay(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	b := envelope([]byte(`{"type":"chat.text","data":{}}`), at, true)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	assert.Equal(t, "2026-01-02T03:04:05.000006Z", m["timestamp"])
	assert.Equal(t, true, m["replay"])
	b = envelope([]byte(`{"type":"chat.text","data":{}}`), at, false)
	require.NoError(t, json.Unmarshal(b, &m))
	assert.NotContains(t, string(b), "replay")
}

// Every frame of one event has its seq, but for the error that comes with
// another frame, so seqs strictly increase along a chat's frames.
func TestFailedRunErrorHasNoSeq(t *testing.T) {
	p := newProjector("c", nil, "m")
	out := p.Project(event.Event{Seq: 9, Payload: event.RunFailed{Code: event.CodeStoreError, Message: "disk"}})
	require.Len(t, out, 2)
	e := out[0].msg.(ag2api.ChatError).Data
	assert.Nil(t, e.Seq)
	assert.Equal(t, "PERSISTENCE_ERROR", *e.ErrorCode)
	assert.Equal(t, int64(9), out[1].seq)
	assert.Equal(t, "error", out[1].msg.(ag2api.RunComplete).Data.Reason)
	out = p.Project(event.Event{Seq: 10, Payload: event.RunFailed{Code: event.CodeStepLimit}})
	require.Len(t, out, 1)
	assert.Equal(t, "max_rounds", out[0].msg.(ag2api.RunComplete).Data.Reason)
}

// Each call is priced at its own model; a call of an unpriced model
// leaves the run's cost out.
func TestUsageIsPricedPerCallModel(t *testing.T) {
	pr, err := loadPrices("")
	require.NoError(t, err)
	p := newProjector("c", pr, "gpt-4o")
	out := p.Project(event.Event{Seq: 1, Run: "r", Payload: event.Usage{PromptTokens: 1_000_000, CompletionTokens: 0, Model: "gpt-4o-mini"}})
	d := out[0].msg.(ag2api.UsageSummary).Data
	require.NotNil(t, d.Cost)
	assert.InDelta(t, 0.15, *d.Cost, 1e-9)
	out = p.Project(event.Event{Seq: 2, Run: "r", Payload: event.Usage{PromptTokens: 1_000_000, CompletionTokens: 1_000_000}})
	d = out[0].msg.(ag2api.UsageSummary).Data
	require.NotNil(t, d.Cost, "an event without a model is priced at the server's")
	assert.InDelta(t, 0.15+2.5+10, *d.Cost, 1e-9)
	assert.Equal(t, 2_000_000, d.PromptTokens)
	assert.Equal(t, 3_000_000, d.TotalTokens)
	out = p.Project(event.Event{Seq: 3, Run: "r", Payload: event.Usage{PromptTokens: 1, Model: "local-llama"}})
	assert.Nil(t, out[0].msg.(ag2api.UsageSummary).Data.Cost)
	p.Project(event.Event{Seq: 4, Run: "r", Payload: event.RunCompleted{Reason: "final_answer"}})
	out = p.Project(event.Event{Seq: 5, Run: "r2", Payload: event.Usage{PromptTokens: 10, CompletionTokens: 5}})
	d = out[0].msg.(ag2api.UsageSummary).Data
	assert.Equal(t, 15, d.TotalTokens, "a new run starts from zero")
	assert.NotNil(t, d.Cost)
}
