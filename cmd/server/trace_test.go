package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	collector "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an OTLP/HTTP trace endpoint that keeps the spans it is
// sent.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []*tracepb.Span
	nodes []string // the agentwire.node of each span's resource
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil || r.URL.Path != "/v1/traces" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	var req collector.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	for _, rs := range req.ResourceSpans {
		node := ""
		for _, a := range rs.GetResource().GetAttributes() {
			if a.Key == "agentwire.node" {
				node = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			o.spans = append(o.spans, ss.Spans...)
			for range ss.Spans {
				o.nodes = append(o.nodes, node)
			}
		}
	}
	o.mu.Unlock()
	out, _ := proto.Marshal(&collector.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// With OTEL_EXPORTER_OTLP_ENDPOINT set, a run is one trace: a child of
// the traceparent its WebSocket upgrade carried, with a span per model
// call and per tool call; the spans are sent before the server exits.
func TestRunIsTraced(t *testing.T) {
	recv := &otlpReceiver{}
	otlp := httptest.NewServer(recv)
	defer otlp.Close()

	ctx, cancel := context.WithCancel(context.Background())
	env := map[string]string{
		"AGENTWIRE_DATA_DIR":          t.TempDir(),
		"AGENTWIRE_WORKDIR":           t.TempDir(),
		"OTEL_EXPORTER_OTLP_ENDPOINT": otlp.URL,
	}
	var stdout, stderr lockedBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--addr", "127.0.0.1:0"}, func(k string) string { return env[k] }, &stdout, &stderr)
	}()
	banner := regexp.MustCompile(`agentchat\s+ws://(127\.0\.0\.1:\d+)/ws`)
	var addr string
	require.Eventually(t, func() bool {
		if m := banner.FindStringSubmatch(stdout.String()); m != nil {
			addr = m[1]
		}
		return addr != ""
	}, 30*time.Second, 10*time.Millisecond, "no banner; stderr: %s", stderr.String())

	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	defer wcancel()
	ws, _, err := websocket.Dial(wctx, "ws://"+addr+"/ws", &websocket.DialOptions{
		HTTPHeader: http.Header{"traceparent": {"00-" + traceID + "-" + parentID + "-01"}},
	})
	require.NoError(t, err)
	chat, _ := json.Marshal(map[string]any{"type": "chat", "message": "list the files", "session_id": "traced"})
	require.NoError(t, ws.Write(wctx, websocket.MessageText, chat))
	for {
		_, b, err := ws.Read(wctx)
		require.NoError(t, err)
		var f map[string]any
		require.NoError(t, json.Unmarshal(b, &f))
		if f["type"] == "agent_message" {
			break
		}
	}
	ws.Close(websocket.StatusNormalClosure, "")
	cancel()
	require.NoError(t, <-done, "stderr: %s", stderr.String())
	assert.Contains(t, stderr.String(), "tracing runs to an OTLP endpoint")

	recv.mu.Lock()
	defer recv.mu.Unlock()
	byName := map[string][]*tracepb.Span{}
	for _, s := range recv.spans {
		assert.Equal(t, traceID, hex.EncodeToString(s.TraceId), "span %s is in the caller's trace", s.Name)
		byName[s.Name] = append(byName[s.Name], s)
	}
	require.Len(t, byName["agentwire.run"], 1, "one run span; got %v", names(recv.spans))
	runSpan := byName["agentwire.run"][0]
	assert.Equal(t, parentID, hex.EncodeToString(runSpan.ParentSpanId), "the run is a child of the traceparent's span")
	require.GreaterOrEqual(t, len(byName["agentwire.model"]), 2, "a model call for the tool call and one for the answer")
	require.Len(t, byName["agentwire.tool"], 1)
	for _, s := range append(byName["agentwire.model"], byName["agentwire.tool"]...) {
		assert.Equal(t, runSpan.SpanId, s.ParentSpanId, "%s is a child of the run", s.Name)
	}
}

func names(spans []*tracepb.Span) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

// A post that another node runs joins the poster's trace: the run's span
// comes from the node that runs it, in the trace of the request that was
// made to the other.
func TestClusterRunJoinsThePostersTrace(t *testing.T) {
	recv := &otlpReceiver{}
	otlp := httptest.NewServer(recv)
	defer otlp.Close()
	c := newCluster(t)
	c.env = []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + otlp.URL, "OTEL_BSP_SCHEDULE_DELAY=50"}
	a, b := c.node("a"), c.node("b")
	thread := uuid.New()

	// a runs the thread's slow run; b is given the next message meanwhile.
	slow, err := threadsClient(t, a).SendMessage(t.Context(), thread, "slow please")
	require.NoError(t, err)
	defer slow.Close()
	var onA stream
	onA.read(t, slow, 1)

	const traceID, parentID = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+b.addr+"/api/v1/threads/"+thread.String(),
		strings.NewReader(`{"text":"echo traced"}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+traceID+"-"+parentID+"-01")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	onA.read(t, slow, -1)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Contains(t, string(body), "event: done", "the queued run ran")

	require.Eventually(t, func() bool {
		recv.mu.Lock()
		defer recv.mu.Unlock()
		for i, s := range recv.spans {
			if s.Name == "agentwire.run" && hex.EncodeToString(s.TraceId) == traceID {
				return assert.Equal(t, "a", recv.nodes[i], "the run ran on the thread's owner") &&
					assert.Equal(t, parentID, hex.EncodeToString(s.ParentSpanId))
			}
		}
		return false
	}, 30*time.Second, 50*time.Millisecond, "no run span in the poster's trace")
}
