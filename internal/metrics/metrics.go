// Package metrics holds the server's instruments: Prometheus counters,
// gauges and histograms of the protocols, the runs, the model and tool
// calls, and the fast paths of the core (the store's group commits, the
// bus's deliveries, previews, slow consumers, runs started ahead of their
// commit). One *Metrics is made per server, registered in a registry of
// its own, and handed to the parts that count; a nil *Metrics counts
// nothing, so tests and tools that build parts alone pass none.
//
// Names and labels follow Prometheus's conventions: a unit suffix
// (_seconds, _bytes), _total on counters, and only labels with a few
// values each (a protocol, an outcome, a tool or model name from the
// configuration), never a thread, run or principal id.
package metrics

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics is one server's instruments. Its methods may be called on a nil
// *Metrics, and then do nothing.
type Metrics struct {
	reg *prometheus.Registry

	connsOpen     *prometheus.GaugeVec
	conns         *prometheus.CounterVec
	framesOut     *prometheus.CounterVec
	framesIn      *prometheus.CounterVec
	slowConsumers *prometheus.CounterVec

	runsStarted  prometheus.Counter
	runsFinished *prometheus.CounterVec
	runsAhead    *prometheus.CounterVec
	leases       prometheus.Counter
	approvals    prometheus.Gauge
	inputs       prometheus.Gauge

	modelFirst  *prometheus.HistogramVec
	modelCall   *prometheus.HistogramVec
	modelTokens *prometheus.CounterVec
	toolCalls   *prometheus.CounterVec
	toolTime    *prometheus.HistogramVec

	commitTime   *prometheus.HistogramVec
	commitEvents *prometheus.HistogramVec
	deliverLag   prometheus.Histogram
	previews     *prometheus.CounterVec
	resubscribes *prometheus.CounterVec
	pulls        prometheus.Gauge

	budgetChecks   *prometheus.CounterVec
	budgetRefusals *prometheus.CounterVec
}

// latency buckets, in seconds: from a tenth of a millisecond (a commit, a
// delivery on one node) to a minute (a model call).
var latency = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// New makes a server's instruments, registered with the Go runtime's and
// the process's collectors in a registry of their own.
func New() *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	f := factory{reg}
	return &Metrics{
		reg: reg,
		connsOpen: f.gaugeVec("agentwire_connections_open",
			"WebSocket connections and event streams open now, by protocol.", "protocol"),
		conns: f.counterVec("agentwire_connections_total",
			"WebSocket connections and event streams opened, by protocol.", "protocol"),
		framesOut: f.counterVec("agentwire_frames_sent_total",
			"Frames (WebSocket messages, SSE events) sent to clients, by protocol.", "protocol"),
		framesIn: f.counterVec("agentwire_frames_received_total",
			"Frames received from clients, by protocol.", "protocol"),
		slowConsumers: f.counterVec("agentwire_slow_consumer_disconnects_total",
			"Clients disconnected because their send queue filled, by protocol.", "protocol"),

		runsStarted: f.counter("agentwire_runs_started_total", "Runs started on this node."),
		runsFinished: f.counterVec("agentwire_runs_finished_total",
			"Runs that ended on this node, by outcome (completed, failed, cancelled, interrupted).", "outcome"),
		runsAhead: f.counterVec("agentwire_runs_ahead_total",
			"Runs started ahead of the commit of their message, by what became of them (committed; undone, when another event was committed first or the claim went elsewhere; restarted, an undone run started again the ordinary way).", "result"),
		leases:    f.counter("agentwire_leases_taken_over_total", "Threads this node took over from a node whose lease ran out."),
		approvals: f.gauge("agentwire_approvals_waiting", "Tool calls waiting for a person's approval on this node."),
		inputs:    f.gauge("agentwire_inputs_waiting", "Input and UI requests waiting for a person's answer on this node."),

		modelFirst: f.histogramVec("agentwire_model_first_token_seconds",
			"Time from a model call to its first streamed chunk, by provider and model.", latency, "provider", "model"),
		modelCall: f.histogramVec("agentwire_model_call_seconds",
			"Duration of model calls, to their last chunk, by provider and model.", latency, "provider", "model"),
		modelTokens: f.counterVec("agentwire_model_tokens_total",
			"Tokens the model calls used, by provider, model and direction (in: prompt, out: completion).", "provider", "model", "direction"),
		toolCalls: f.counterVec("agentwire_tool_calls_total",
			"Tool calls judged by the approval policy, by tool and verdict (ran, asked, refused).", "tool", "verdict"),
		toolTime: f.histogramVec("agentwire_tool_call_seconds",
			"Duration of tool calls that ran, by tool.", latency, "tool"),

		commitTime: f.histogramVec("agentwire_store_commit_seconds",
			"Duration of the store's group commits, by backend.", latency, "backend"),
		commitEvents: f.histogramVec("agentwire_store_commit_events",
			"Events in each group commit, by backend.", []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048}, "backend"),
		deliverLag: f.histogram("agentwire_bus_deliver_lag_seconds",
			"Time from an event's commit to its hand-over to a subscriber of this node.", latency),
		previews: f.counterVec("agentwire_previews_total",
			"Previews (text sent ahead of its commit) offered to subscribers, by result (delivered, dropped: the subscriber's queue was full).", "result"),
		resubscribes: f.counterVec("agentwire_resubscribes_total",
			"Subscriptions that fell behind their queue or may have missed events and caught up from the log, by reason (slow, missed).", "reason"),
		pulls: f.gauge("agentwire_subscriptions_open", "Subscriptions to threads open on this node."),

		budgetChecks: f.counterVec("agentwire_budget_checks_total",
			"Budget checks before model calls (--budgets), by result (allowed, refused, error: the spending could not be read).", "result"),
		budgetRefusals: f.counterVec("agentwire_budget_refusals_total",
			"Model calls refused because a principal's budget was used up, by window (day, month) and kind (tokens, cost).", "window", "kind"),
	}
}

// Handler serves the instruments in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Registry is where the instruments are registered, for a caller that adds
// collectors of its own.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// factory makes and registers instruments.
type factory struct{ reg *prometheus.Registry }

func (f factory) counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	f.reg.MustRegister(c)
	return c
}

func (f factory) counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	f.reg.MustRegister(c)
	return c
}

func (f factory) gauge(name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	f.reg.MustRegister(g)
	return g
}

func (f factory) gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	f.reg.MustRegister(g)
	return g
}

func (f factory) histogram(name, help string, buckets []float64) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
	f.reg.MustRegister(h)
	return h
}

func (f factory) histogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
	f.reg.MustRegister(h)
	return h
}

// ConnOpened counts a connection (or event stream) of protocol opening;
// the returned function counts it closing.
func (m *Metrics) ConnOpened(protocol string) (closed func()) {
	if m == nil {
		return func() {}
	}
	m.conns.WithLabelValues(protocol).Inc()
	g := m.connsOpen.WithLabelValues(protocol)
	g.Inc()
	return g.Dec
}

// Frames are the frame counters of one protocol, looked up once (by a
// connection when it opens) so that a frame costs an atomic add rather than
// a lookup by label: per frame, that lookup was 3.4 % of the server's CPU
// in a threads fan-out profile. The zero Frames counts nothing.
type Frames struct {
	sent, received prometheus.Counter
}

// Frames returns the frame counters of protocol; on a nil *Metrics, the
// zero Frames.
func (m *Metrics) Frames(protocol string) Frames {
	if m == nil {
		return Frames{}
	}
	return Frames{sent: m.framesOut.WithLabelValues(protocol), received: m.framesIn.WithLabelValues(protocol)}
}

// Sent counts a frame sent to a client.
func (f Frames) Sent() {
	if f.sent != nil {
		f.sent.Inc()
	}
}

// Received counts a frame received from a client.
func (f Frames) Received() {
	if f.received != nil {
		f.received.Inc()
	}
}

// SlowConsumer counts a client of protocol disconnected for not keeping up.
func (m *Metrics) SlowConsumer(protocol string) {
	if m != nil {
		m.slowConsumers.WithLabelValues(protocol).Inc()
	}
}

// RunStarted counts a run starting on this node.
func (m *Metrics) RunStarted() {
	if m != nil {
		m.runsStarted.Inc()
	}
}

// RunFinished counts a run ending with outcome.
func (m *Metrics) RunFinished(outcome string) {
	if m != nil {
		m.runsFinished.WithLabelValues(outcome).Inc()
	}
}

// Results of a run started ahead of its commit (RunAhead).
const (
	AheadCommitted = "committed"
	AheadUndone    = "undone"
	AheadRestarted = "restarted"
)

// RunAhead counts what became of a run started ahead of its commit.
func (m *Metrics) RunAhead(result string) {
	if m != nil {
		m.runsAhead.WithLabelValues(result).Inc()
	}
}

// LeaseTakenOver counts a thread taken over from a dead node.
func (m *Metrics) LeaseTakenOver() {
	if m != nil {
		m.leases.Inc()
	}
}

// ApprovalWaiting counts a tool call waiting for approval; the returned
// function counts its answer.
func (m *Metrics) ApprovalWaiting() (answered func()) {
	if m == nil {
		return func() {}
	}
	m.approvals.Inc()
	return m.approvals.Dec
}

// InputWaiting counts an input or UI request waiting for an answer; the
// returned function counts its answer.
func (m *Metrics) InputWaiting() (answered func()) {
	if m == nil {
		return func() {}
	}
	m.inputs.Inc()
	return m.inputs.Dec
}

// Results of a budget check (BudgetChecked).
const (
	BudgetAllowed = "allowed"
	BudgetRefused = "refused"
	BudgetError   = "error"
)

// BudgetChecked counts a budget check before a model call, by result.
func (m *Metrics) BudgetChecked(result string) {
	if m != nil {
		m.budgetChecks.WithLabelValues(result).Inc()
	}
}

// BudgetRefusal counts a model call refused by the budget of window (day,
// month) and kind (tokens, cost).
func (m *Metrics) BudgetRefusal(window, kind string) {
	if m != nil {
		m.budgetRefusals.WithLabelValues(window, kind).Inc()
	}
}

// ModelCall records a model call that began at start: when its first
// chunk came (zero if none did) and when it ended, and the tokens it used.
func (m *Metrics) ModelCall(provider, model string, start, first, end time.Time, in, out int) {
	if m == nil {
		return
	}
	if !first.IsZero() {
		m.modelFirst.WithLabelValues(provider, model).Observe(first.Sub(start).Seconds())
	}
	m.modelCall.WithLabelValues(provider, model).Observe(end.Sub(start).Seconds())
	if in > 0 {
		m.modelTokens.WithLabelValues(provider, model, "in").Add(float64(in))
	}
	if out > 0 {
		m.modelTokens.WithLabelValues(provider, model, "out").Add(float64(out))
	}
}

// Verdicts of a tool call (ToolJudged).
const (
	VerdictRan     = "ran"
	VerdictAsked   = "asked"
	VerdictRefused = "refused"
)

// ToolJudged counts a tool call the policy judged.
func (m *Metrics) ToolJudged(tool, verdict string) {
	if m != nil {
		m.toolCalls.WithLabelValues(tool, verdict).Inc()
	}
}

// ToolRan records the duration of a tool call that ran.
func (m *Metrics) ToolRan(tool string, d time.Duration) {
	if m != nil {
		m.toolTime.WithLabelValues(tool).Observe(d.Seconds())
	}
}

// Commit records a group commit of n events on backend that took d.
func (m *Metrics) Commit(backend string, n int, d time.Duration) {
	if m != nil {
		m.commitTime.WithLabelValues(backend).Observe(d.Seconds())
		m.commitEvents.WithLabelValues(backend).Observe(float64(n))
	}
}

// Delivered records the time from an event's commit to its hand-over to
// a subscriber.
func (m *Metrics) Delivered(lag time.Duration) {
	if m != nil {
		m.deliverLag.Observe(lag.Seconds())
	}
}

// Preview counts a preview offered to a subscriber: delivered, or dropped
// because its queue was full.
func (m *Metrics) Preview(delivered bool) {
	if m == nil {
		return
	}
	if delivered {
		m.previews.WithLabelValues("delivered").Inc()
	} else {
		m.previews.WithLabelValues("dropped").Inc()
	}
}

// Reasons a subscription caught up from the log (Resubscribed).
const (
	ResubscribeSlow   = "slow"
	ResubscribeMissed = "missed"
)

// Resubscribed counts a subscription that caught up from the log.
func (m *Metrics) Resubscribed(reason string) {
	if m != nil {
		m.resubscribes.WithLabelValues(reason).Inc()
	}
}

// SubscriptionOpened counts a subscription opening; the returned function
// counts it closing.
func (m *Metrics) SubscriptionOpened() (closed func()) {
	if m == nil {
		return func() {}
	}
	m.pulls.Inc()
	return m.pulls.Dec
}

// Sample is the value of the series name with labels (all of them given)
// as a scrape would read it: a counter's or gauge's value, a histogram's
// count of observations; ok is false when no such series exists yet.
// Tests use it to check that a path counts what it should.
func (m *Metrics) Sample(name string, labels map[string]string) (v float64, ok bool) {
	families, err := m.reg.Gather()
	if err != nil {
		return 0, false
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, s := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range s.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, want := range labels {
				if have[k] != want {
					continue series
				}
			}
			switch {
			case s.GetCounter() != nil:
				return s.GetCounter().GetValue(), true
			case s.GetGauge() != nil:
				return s.GetGauge().GetValue(), true
			case s.GetHistogram() != nil:
				return float64(s.GetHistogram().GetSampleCount()), true
			}
		}
	}
	return 0, false
}
