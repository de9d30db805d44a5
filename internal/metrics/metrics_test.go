package metrics_test

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/metrics"
)

// TestNilCountsNothing: every method may be called on a nil *Metrics.
func TestNilCountsNothing(t *testing.T) {
	var m *metrics.Metrics
	m.ConnOpened("p")()
	m.Frames("p").Sent()
	m.Frames("p").Received()
	metrics.Frames{}.Sent()
	m.SlowConsumer("p")
	m.RunStarted()
	m.RunFinished("completed")
	m.RunAhead(metrics.AheadUndone)
	m.LeaseTakenOver()
	m.ApprovalWaiting()()
	m.InputWaiting()()
	m.ModelCall("p", "m", time.Now(), time.Now(), time.Now(), 1, 1)
	m.ToolJudged("t", metrics.VerdictRan)
	m.ToolRan("t", time.Second)
	m.Commit("b", 1, time.Millisecond)
	m.Delivered(time.Millisecond)
	m.Preview(false)
	m.Resubscribed(metrics.ResubscribeSlow)
	m.SubscriptionOpened()()
}

// TestScrape: what is counted is what a scrape reads, in the Prometheus
// text format, under the documented names.
func TestScrape(t *testing.T) {
	m := metrics.New()
	closed := m.ConnOpened("agentchat")
	frames := m.Frames("agentchat")
	for range 3 {
		frames.Sent()
	}
	m.Frames("agentchat").Received()
	m.ToolJudged("bash", metrics.VerdictAsked)
	start := time.Now()
	m.ModelCall("openai", "gpt-4o-mini", start, start.Add(10*time.Millisecond), start.Add(50*time.Millisecond), 100, 20)
	m.Preview(false)

	v, ok := m.Sample("agentwire_connections_open", map[string]string{"protocol": "agentchat"})
	assert.True(t, ok)
	assert.Equal(t, 1.0, v)
	closed()
	v, _ = m.Sample("agentwire_connections_open", map[string]string{"protocol": "agentchat"})
	assert.Zero(t, v)
	v, _ = m.Sample("agentwire_model_tokens_total", map[string]string{"model": "gpt-4o-mini", "direction": "in"})
	assert.Equal(t, 100.0, v)
	_, ok = m.Sample("agentwire_model_first_token_seconds", map[string]string{"provider": "openai"})
	assert.True(t, ok)
	_, ok = m.Sample("agentwire_connections_open", map[string]string{"protocol": "threads"})
	assert.False(t, ok, "a series nothing counted")

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, err := io.ReadAll(rec.Result().Body)
	require.NoError(t, err)
	text := string(body)
	for _, want := range []string{
		`agentwire_frames_sent_total{protocol="agentchat"} 3`,
		`agentwire_frames_received_total{protocol="agentchat"} 1`,
		`agentwire_tool_calls_total{tool="bash",verdict="asked"} 1`,
		`agentwire_previews_total{result="dropped"} 1`,
		`go_goroutines`,
	} {
		assert.True(t, strings.Contains(text, want), "the scrape lacks %q", want)
	}
}
