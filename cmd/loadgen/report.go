package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
)

// latencyAgg pools what the runs of one latency scenario on one side saw.
type latencyAgg struct {
	mu         sync.Mutex
	added      []time.Duration // per token: client receive - upstream send
	first      []time.Duration // per stream: first token received - request sent
	toUpstream []time.Duration // per stream: upstream request - request sent
	delivered  int             // tokens received
	expected   int
	frames     int // frames that brought tokens
	messages   int
	cpu        time.Duration
	writeBytes int64
	dirGrowth  int64
	streamed   int // tokens the upstream streamed
	failures   []string
}

func (a *latencyAgg) addReceipt(rc *receipt, s *stream) {
	at, got, frames := rc.snapshot()
	a.delivered += got
	a.expected += s.n
	a.frames += frames
	a.messages++
	for i, t := range at {
		if sent := s.sentAt(i); t != 0 && sent > 0 {
			a.added = append(a.added, t-sent)
		}
	}
	a.addTimes(rc, s)
}

// addTimes records a stream's first-token and request-to-upstream times.
func (a *latencyAgg) addTimes(rc *receipt, s *stream) {
	at, _, _ := rc.snapshot()
	var first time.Duration
	for _, t := range at {
		if t != 0 && (first == 0 || t < first) {
			first = t
		}
	}
	if first > 0 && rc.sentAt > 0 {
		a.first = append(a.first, first-rc.sentAt)
	}
	if arr := time.Duration(s.arrivedAt.Load()); arr > 0 && rc.sentAt > 0 {
		a.toUpstream = append(a.toUpstream, arr-rc.sentAt)
	}
}

type idleAgg struct {
	mu        sync.Mutex
	sessions  int
	rssGrowth int64
}

type fanAgg struct {
	mu        sync.Mutex
	delivered int
	expected  int
	frames    int
	cpu       time.Duration
	failures  []string
}

type latKey struct {
	proto string
	conc  int
}

// results holds every scenario's aggregates, per side.
type results struct {
	mu   sync.Mutex
	lat  map[latKey]*[2]*latencyAgg
	idl  [2]*idleAgg
	fans map[string]*[2]*fanAgg
	prob [2]probeSamples
}

func (r *results) addProbe(side int, s probeSamples) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.prob[side].fsync = append(r.prob[side].fsync, s.fsync...)
	r.prob[side].late = append(r.prob[side].late, s.late...)
}

func newResults() *results {
	return &results{lat: map[latKey]*[2]*latencyAgg{}, fans: map[string]*[2]*fanAgg{},
		idl: [2]*idleAgg{{}, {}}}
}

func (r *results) latency(proto string, conc, side int) *latencyAgg {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := latKey{proto, conc}
	if r.lat[k] == nil {
		r.lat[k] = &[2]*latencyAgg{{}, {}}
	}
	return r.lat[k][side]
}

func (r *results) idle(side int) *idleAgg { return r.idl[side] }

func (r *results) fan(proto string, side int) *fanAgg {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fans[proto] == nil {
		r.fans[proto] = &[2]*fanAgg{{}, {}}
	}
	return r.fans[proto][side]
}

// Row is one line of the report: a metric on agentwire and on the relay.
type Row struct {
	Metric string
	Values [2]float64 // agentwire, baseline
	Digits int        // decimals shown
	// ZeroBaseline marks a metric whose baseline is 0 by design (the relay
	// keeps nothing), so only agentwire's value must be positive.
	ZeroBaseline bool
}

// Ratio is agentwire's value over the baseline's (NaN when the baseline
// is 0).
func (r Row) Ratio() float64 {
	if r.Values[1] == 0 {
		return math.NaN()
	}
	return r.Values[0] / r.Values[1]
}

// Report is the outcome of a run.
type Report struct {
	Header     []string
	Rows       []Row
	Notes      []string
	Incomplete []string // receivers that did not get every token
	Delivered  [2]int   // tokens received, per side
	Expected   [2]int
}

// Complete reports whether both sides delivered every token.
func (rep *Report) Complete() bool {
	return rep.Delivered == rep.Expected && len(rep.Incomplete) == 0
}

// Write prints the report as Markdown: the header, the table, the notes.
func (rep *Report) Write(w io.Writer) {
	for _, h := range rep.Header {
		fmt.Fprintln(w, h)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| metric | agentwire | baseline | ratio |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: |")
	for _, r := range rep.Rows {
		ratio := "n/a (baseline 0)"
		if x := r.Ratio(); !math.IsNaN(x) {
			ratio = fmt.Sprintf("%.2f×", x)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", r.Metric, number(r.Values[0], r.Digits), number(r.Values[1], r.Digits), ratio)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Tokens delivered: agentwire %d of %d, relay %d of %d.\n",
		rep.Delivered[0], rep.Expected[0], rep.Delivered[1], rep.Expected[1])
	for _, n := range rep.Notes {
		fmt.Fprintln(w, "- "+n)
	}
	if len(rep.Incomplete) > 0 {
		fmt.Fprintf(w, "\nINCOMPLETE: %d receivers did not get every token; the first:\n", len(rep.Incomplete))
		for _, s := range rep.Incomplete[:min(10, len(rep.Incomplete))] {
			fmt.Fprintln(w, "  "+s)
		}
	}
}

// number formats v with digits decimals and thousands separators.
func number(v float64, digits int) string {
	s := fmt.Sprintf("%.*f", digits, v)
	intPart, frac, _ := strings.Cut(s, ".")
	neg := strings.HasPrefix(intPart, "-")
	intPart = strings.TrimPrefix(intPart, "-")
	var b strings.Builder
	for i, c := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	out := b.String()
	if frac != "" {
		out += "." + frac
	}
	if neg {
		out = "-" + out
	}
	return out
}

// percentile is the nearest-rank p-quantile (0 < p <= 1) of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

var protoNames = map[string]string{"threads": "threads SSE", "agentchat": "agentchat"}

// report turns the aggregates into rows, in the order the scenarios ran.
func (r *results) report(cfg Config) *Report {
	rep := &Report{}
	count := func(side, delivered, expected int, failures []string) {
		rep.Delivered[side] += delivered
		rep.Expected[side] += expected
		for _, f := range failures {
			rep.Incomplete = append(rep.Incomplete, sideNames[side]+": "+f)
		}
	}
	var (
		diskBytes     = map[int]*[2]int64{} // by concurrency
		dirBytes      = map[int]*[2]int64{}
		diskTokens    = map[int]*[2]int{}
		haveDisk      bool
		chunkMismatch bool
	)
	for _, sc := range cfg.Scenarios {
		switch sc {
		case "latency":
			for _, p := range cfg.Protocols {
				for _, c := range cfg.Concurrency {
					a := r.lat[latKey{p, c}]
					if a == nil {
						continue
					}
					name := protoNames[p] + ", " + plural(c, "stream", "streams")
					var row [5][2]float64
					for side, ag := range a {
						count(side, ag.delivered, ag.expected, ag.failures)
						row[0][side] = ms(percentile(ag.added, 0.50))
						row[1][side] = ms(percentile(ag.added, 0.99))
						row[2][side] = ms(percentile(ag.first, 0.50))
						row[3][side] = ms(percentile(ag.toUpstream, 0.50))
						if ag.delivered > 0 {
							row[4][side] = float64(ag.cpu) / float64(time.Microsecond) / float64(ag.delivered)
						}
						if diskBytes[c] == nil {
							diskBytes[c], dirBytes[c], diskTokens[c] = &[2]int64{}, &[2]int64{}, &[2]int{}
						}
						diskBytes[c][side] += ag.writeBytes
						dirBytes[c][side] += ag.dirGrowth
						diskTokens[c][side] += ag.streamed
						haveDisk = true
					}
					rep.Rows = append(rep.Rows,
						Row{Metric: name + ": added latency per token p50 (ms)", Values: row[0], Digits: 2},
						Row{Metric: name + ": added latency per token p99 (ms)", Values: row[1], Digits: 2},
						Row{Metric: name + ": first-token latency p50 (ms)", Values: row[2], Digits: 2},
						Row{Metric: name + ": request to upstream call p50 (ms)", Values: row[3], Digits: 2},
						Row{Metric: name + ": server CPU per delivered token (µs)", Values: row[4], Digits: 1},
					)
					if p == "agentchat" {
						aw, rl := perMessage(a[0]), perMessage(a[1])
						rep.Notes = append(rep.Notes, fmt.Sprintf("%s: frames per reply: agentwire %.1f, relay %.1f (of %d tokens)",
							name, aw, rl, cfg.Tokens))
						chunkMismatch = chunkMismatch || (aw < 1.5 && rl > 1.5)
					}
				}
			}
		case "idle":
			var v [2]float64
			for side, ag := range r.idl {
				if ag.sessions > 0 {
					v[side] = float64(ag.rssGrowth) / 1024 / float64(ag.sessions)
				}
			}
			what := "no chat"
			if cfg.IdleChat {
				what = "one short chat each"
			}
			rep.Rows = append(rep.Rows, Row{
				Metric: fmt.Sprintf("idle agentchat sessions (%s, %s): RSS growth per session (KiB)", number(float64(cfg.IdleSessions), 0), what),
				Values: v, Digits: 1,
			})
		case "fanout":
			for _, p := range cfg.Protocols {
				a := r.fans[p]
				if a == nil {
					continue
				}
				var v [2]float64
				var frames [2]float64
				for side, ag := range a {
					count(side, ag.delivered, ag.expected, ag.failures)
					if ag.cpu > 0 {
						v[side] = float64(ag.delivered) / ag.cpu.Seconds()
					}
					if ag.expected > 0 {
						frames[side] = float64(ag.frames) / float64(ag.expected/cfg.Tokens)
					}
				}
				recv := "subscribers of one thread"
				if p == "agentchat" {
					recv = "sockets of one session"
				}
				rep.Rows = append(rep.Rows, Row{
					Metric: fmt.Sprintf("fan-out %s, %d %s: token deliveries per server CPU-second (higher is better)", protoNames[p], cfg.FanOut, recv),
					Values: v,
				})
				if p == "agentchat" {
					rep.Notes = append(rep.Notes, fmt.Sprintf("fan-out agentchat: frames per socket: agentwire %.1f, relay %.1f (of %d tokens)",
						frames[0], frames[1], cfg.Tokens))
				}
			}
		}
	}
	if haveDisk {
		for _, c := range cfg.Concurrency {
			if diskTokens[c] == nil {
				continue
			}
			var io, dir [2]float64
			for side := range 2 {
				if n := diskTokens[c][side]; n > 0 {
					io[side] = float64(diskBytes[c][side]) / float64(n)
					dir[side] = float64(dirBytes[c][side]) / float64(n)
				}
			}
			streams := plural(c, "stream", "concurrent streams")
			rep.Rows = append(rep.Rows,
				Row{Metric: "disk bytes written per streamed token, " + streams + " (/proc/PID/io write_bytes)", Values: io, ZeroBaseline: true},
				Row{Metric: "data-dir growth per streamed token, " + streams + " (bytes)", Values: dir, ZeroBaseline: true},
			)
		}
	}
	for side, p := range r.prob {
		if len(p.late) == 0 {
			continue
		}
		rep.Notes = append(rep.Notes, fmt.Sprintf("the machine while %s ran (sampled every %v): 4 KiB O_SYNC write p50 %.2f ms, p99 %.2f ms, max %.1f ms; loadgen timer lateness p99 %.2f ms, max %.1f ms",
			sideNames[side], probeInterval, ms(percentile(p.fsync, 0.5)), ms(percentile(p.fsync, 0.99)), ms(slices.Max(append([]time.Duration{0}, p.fsync...))),
			ms(percentile(p.late, 0.99)), ms(slices.Max(p.late))))
	}
	if chunkMismatch {
		rep.Notes = append(rep.Notes, "agentwire sent one agent_message per reply although the URL asked for ?stream=chunks, "+
			"while the relay sent one per token: the agentchat rows compare a whole reply at its end with a stream of tokens "+
			"(added latency there is the wait for the end of the reply; fan-out deliveries count tokens, not frames); "+
			"-agentchat-chunks=false compares like with like")
	}
	return rep
}

func perMessage(a *latencyAgg) float64 {
	if a.messages == 0 {
		return 0
	}
	return float64(a.frames) / float64(a.messages)
}

// header describes the run and the machine.
func (r *runner) header(load0 string, took time.Duration) []string {
	c := r.cfg
	what := []string{fmt.Sprintf("%d tokens per stream at %g tokens/s", c.Tokens, c.Rate)}
	for _, sc := range c.Scenarios {
		switch sc {
		case "latency":
			what = append(what, fmt.Sprintf("latency at %v concurrent streams", c.Concurrency))
		case "idle":
			what = append(what, fmt.Sprintf("%d idle sessions", c.IdleSessions))
		case "fanout":
			what = append(what, fmt.Sprintf("fan-out to %d", c.FanOut))
		}
	}
	what = append(what, fmt.Sprintf("%d rounds per side, alternating", c.Rounds),
		fmt.Sprintf("protocols %s", strings.Join(c.Protocols, ", ")), fmt.Sprintf("agentchat ?stream=chunks %v", c.AgentchatChunks))
	h := []string{
		"loadgen: " + strings.Join(what, "; "),
		fmt.Sprintf("machine: %d CPUs (%s), %s RAM, %s, GOMAXPROCS=%d; load average %s at start, %s at end; run took %s",
			runtime.NumCPU(), cpuModel(), memTotal(), runtime.Version(), runtime.GOMAXPROCS(0), load0, loadAverage(), took.Round(time.Second)),
		"agentwire: SQLite under a fresh temp --data-dir per run, flags " + strings.Join(agentwireFlags, " "),
		"baseline: `loadgen relay`, a naive relay that passes each upstream token on as it arrives and keeps nothing",
		"ratio: agentwire / baseline",
	}
	return h
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

func memTotal() string {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return "?"
	}
	kb, err := procField(string(b), "MemTotal:")
	if err != nil {
		return "?"
	}
	return fmt.Sprintf("%.0f GiB", float64(kb)/(1<<20))
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
