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
	lastToken []time.Duration // per receiver: its last token's arrival - the upstream's sending it
	failures  []string
}

// openAgg is what one run of the open scenario on one side saw.
type openAgg struct {
	mu        sync.Mutex
	sessions  int
	cpu       time.Duration
	delivered int
	expected  int
}

// key names one run's aggregates: a scenario's protocol and size, and its
// round.
type key struct {
	proto string
	conc  int
	round int
}

// storeRound is one round of the store's append benchmark.
type storeRound struct {
	store, raw float64 // committed events/s
}

// results holds every scenario's aggregates, per round and side.
type results struct {
	mu    sync.Mutex
	lat   map[key]*[2]*latencyAgg
	idl   map[int]*[2]*idleAgg
	fans  map[key]*[2]*fanAgg
	opens map[key]*[2]*openAgg
	store []storeRound
	prob  [2]probeSamples
}

func (r *results) addProbe(side int, s probeSamples) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.prob[side].fsync = append(r.prob[side].fsync, s.fsync...)
	r.prob[side].late = append(r.prob[side].late, s.late...)
}

func newResults() *results {
	return &results{lat: map[key]*[2]*latencyAgg{}, idl: map[int]*[2]*idleAgg{},
		fans: map[key]*[2]*fanAgg{}, opens: map[key]*[2]*openAgg{}}
}

// slot returns m[k][side], making the pair on first use.
func slot[T any](mu *sync.Mutex, m map[key]*[2]*T, k key, side int) *T {
	mu.Lock()
	defer mu.Unlock()
	if m[k] == nil {
		m[k] = &[2]*T{new(T), new(T)}
	}
	return m[k][side]
}

func (r *results) latency(proto string, conc, round, side int) *latencyAgg {
	return slot(&r.mu, r.lat, key{proto, conc, round}, side)
}

func (r *results) idle(round, side int) *idleAgg {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.idl[round] == nil {
		r.idl[round] = &[2]*idleAgg{{}, {}}
	}
	return r.idl[round][side]
}

func (r *results) fan(proto string, round, side int) *fanAgg {
	return slot(&r.mu, r.fans, key{proto: proto, round: round}, side)
}

func (r *results) opened(proto string, round, side int) *openAgg {
	return slot(&r.mu, r.opens, key{proto: proto, round: round}, side)
}

// Row is one line of the report: a metric on agentwire and on the relay,
// measured once per round.
type Row struct {
	Metric string
	Rounds [][2]float64 // each round's value: agentwire, baseline
	Values [2]float64   // the median over the rounds of each side's values
	Digits int          // decimals shown
	// ZeroBaseline marks a metric whose baseline is 0 by design (the relay
	// keeps nothing), so only agentwire's value must be positive.
	ZeroBaseline bool
}

// newRow makes a row of the values of its rounds.
func newRow(metric string, digits int, rounds [][2]float64) Row {
	r := Row{Metric: metric, Rounds: rounds, Digits: digits}
	for side := range 2 {
		r.Values[side] = median(r.column(side))
	}
	return r
}

func (r Row) column(side int) []float64 {
	v := make([]float64, len(r.Rounds))
	for i, rv := range r.Rounds {
		v[i] = rv[side]
	}
	return v
}

// Ratios is agentwire's value over the baseline's in each round whose
// baseline is not 0.
func (r Row) Ratios() []float64 {
	var out []float64
	for _, rv := range r.Rounds {
		if rv[1] != 0 {
			out = append(out, rv[0]/rv[1])
		}
	}
	return out
}

// Ratio is the median of the rounds' ratios (NaN when every baseline is
// 0).
func (r Row) Ratio() float64 { return median(r.Ratios()) }

// median is the middle value of vs (the mean of the two middle ones for
// an even count; NaN for none).
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// spread formats the median of vs, with unit after it, and, for more
// than one value, their range: "1.68× (1.55–1.81)".
func spread(vs []float64, unit string, format func(float64) string) string {
	m := format(median(vs)) + unit
	if len(vs) < 2 {
		return m
	}
	return fmt.Sprintf("%s (%s–%s)", m, format(slices.Min(vs)), format(slices.Max(vs)))
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
		num := func(v float64) string { return number(v, r.Digits) }
		ratio := "n/a (baseline 0)"
		if xs := r.Ratios(); len(xs) > 0 {
			ratio = spread(xs, "×", func(v float64) string { return fmt.Sprintf("%.2f", v) })
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", r.Metric, spread(r.column(0), "", num), spread(r.column(1), "", num), ratio)
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

// report turns the aggregates into rows, in the order the scenarios ran:
// each row has a value per round and side, computed from that run alone.
func (r *results) report(cfg Config) *Report {
	rep := &Report{}
	count := func(side, delivered, expected int, failures []string) {
		rep.Delivered[side] += delivered
		rep.Expected[side] += expected
		for _, f := range failures {
			rep.Incomplete = append(rep.Incomplete, sideNames[side]+": "+f)
		}
	}
	type disk struct {
		bytes, dir int64
		tokens     int
	}
	var (
		disks         = map[key]*[2]disk{} // by concurrency and round
		chunkMismatch bool
	)
	for _, sc := range cfg.Scenarios {
		switch sc {
		case "latency":
			for _, p := range cfg.Protocols {
				for _, c := range cfg.Concurrency {
					name := protoNames[p] + ", " + plural(c, "stream", "streams")
					var (
						vals         [5][][2]float64
						frames, msgs [2]int
						seen         bool
					)
					for round := range cfg.Rounds {
						a := r.lat[key{p, c, round}]
						if a == nil {
							continue
						}
						seen = true
						var row [5][2]float64
						dk := key{conc: c, round: round}
						if disks[dk] == nil {
							disks[dk] = &[2]disk{}
						}
						for side, ag := range a {
							count(side, ag.delivered, ag.expected, ag.failures)
							row[0][side] = ms(percentile(ag.added, 0.50))
							row[1][side] = ms(percentile(ag.added, 0.99))
							row[2][side] = ms(percentile(ag.first, 0.50))
							row[3][side] = ms(percentile(ag.toUpstream, 0.50))
							if ag.delivered > 0 {
								row[4][side] = float64(ag.cpu) / float64(time.Microsecond) / float64(ag.delivered)
							}
							frames[side] += ag.frames
							msgs[side] += ag.messages
							d := &disks[dk][side]
							d.bytes += ag.writeBytes
							d.dir += ag.dirGrowth
							d.tokens += ag.streamed
						}
						for i := range vals {
							vals[i] = append(vals[i], row[i])
						}
					}
					if !seen {
						continue
					}
					rep.Rows = append(rep.Rows,
						newRow(name+": added latency per token p50 (ms)", 2, vals[0]),
						newRow(name+": added latency per token p99 (ms)", 2, vals[1]),
						newRow(name+": first-token latency p50 (ms)", 2, vals[2]),
						newRow(name+": request to upstream call p50 (ms)", 2, vals[3]),
						newRow(name+": server CPU per delivered token (µs)", 1, vals[4]),
					)
					if p == "agentchat" {
						aw, rl := ratioOf(frames[0], msgs[0]), ratioOf(frames[1], msgs[1])
						rep.Notes = append(rep.Notes, fmt.Sprintf("%s: frames per reply: agentwire %.1f, relay %.1f (of %d tokens)",
							name, aw, rl, cfg.Tokens))
						chunkMismatch = chunkMismatch || (aw < 1.5 && rl > 1.5)
					}
				}
			}
		case "idle":
			var vals [][2]float64
			for round := range cfg.Rounds {
				a := r.idl[round]
				if a == nil {
					continue
				}
				var v [2]float64
				for side, ag := range a {
					if ag.sessions > 0 {
						v[side] = float64(ag.rssGrowth) / 1024 / float64(ag.sessions)
					}
				}
				vals = append(vals, v)
			}
			if len(vals) == 0 {
				continue
			}
			what := "no chat"
			if cfg.IdleChat {
				what = "one short chat each"
			}
			rep.Rows = append(rep.Rows, newRow(
				fmt.Sprintf("idle agentchat sessions (%s, %s): RSS growth per session (KiB)", number(float64(cfg.IdleSessions), 0), what), 1, vals))
		case "fanout":
			for _, p := range cfg.Protocols {
				var (
					perCPU, last [][2]float64
					frames       [2]int
					replies      [2]int
				)
				for round := range cfg.Rounds {
					a := r.fans[key{proto: p, round: round}]
					if a == nil {
						continue
					}
					var v, l [2]float64
					for side, ag := range a {
						count(side, ag.delivered, ag.expected, ag.failures)
						if ag.cpu > 0 {
							v[side] = float64(ag.delivered) / ag.cpu.Seconds()
						}
						l[side] = ms(percentile(ag.lastToken, 0.50))
						frames[side] += ag.frames
						replies[side] += ag.expected / cfg.Tokens
					}
					perCPU, last = append(perCPU, v), append(last, l)
				}
				if len(perCPU) == 0 {
					continue
				}
				recv := fmt.Sprintf("%d streams on one thread (a POST and %d subscribers)", cfg.FanOut, cfg.FanOut-1)
				if p == "agentchat" {
					recv = fmt.Sprintf("%d sockets of one session", cfg.FanOut)
				}
				name := fmt.Sprintf("fan-out %s, %s", protoNames[p], recv)
				rep.Rows = append(rep.Rows,
					newRow(name+": token deliveries per server CPU-second (higher is better)", 0, perCPU),
					newRow(name+": last-token latency p50 (ms)", 2, last),
				)
				if p == "agentchat" {
					rep.Notes = append(rep.Notes, fmt.Sprintf("fan-out agentchat: frames per socket: agentwire %.1f, relay %.1f (of %d tokens)",
						ratioOf(frames[0], replies[0]), ratioOf(frames[1], replies[1]), cfg.Tokens))
				}
			}
		case "open":
			for _, p := range cfg.Protocols {
				var vals [][2]float64
				for round := range cfg.Rounds {
					a := r.opens[key{proto: p, round: round}]
					if a == nil {
						continue
					}
					var v [2]float64
					for side, ag := range a {
						count(side, ag.delivered, ag.expected, nil)
						if ag.sessions > 0 {
							v[side] = ms(ag.cpu) / float64(ag.sessions)
						}
					}
					vals = append(vals, v)
				}
				if len(vals) == 0 {
					continue
				}
				how := "a socket dialled, one chat on a new session, closed"
				if p == "threads" {
					how = "a POST on a new thread, read to done"
				}
				rep.Rows = append(rep.Rows, newRow(fmt.Sprintf("opening a session, %s (%s; a %d-token reply), %d sessions %d at a time: server CPU per session (ms)",
					protoNames[p], how, openTokens, cfg.OpenSessions, openParallel), 2, vals))
			}
		case "postgres":
			if cfg.Postgres == "" {
				rep.Notes = append(rep.Notes, "PostgreSQL append vs raw COPY: not run (no -postgres URL, no AGENTWIRE_TEST_POSTGRES_URL); "+
					"by hand: "+storeBenchCommand(cfg))
				continue
			}
			var vals [][2]float64
			for _, sr := range r.store {
				vals = append(vals, [2]float64{sr.store, sr.raw})
			}
			rep.Rows = append(rep.Rows, newRow(fmt.Sprintf("PostgreSQL store append vs raw COPY (store benchmark, %d threads, %s events per round): "+
				"committed events/s (higher is better)", storeBenchThreads, number(float64(cfg.PostgresEvents), 0)), 0, vals))
		}
	}
	for _, c := range cfg.Concurrency {
		var io, dir [][2]float64
		for round := range cfg.Rounds {
			d := disks[key{conc: c, round: round}]
			if d == nil {
				continue
			}
			var iv, dv [2]float64
			for side := range 2 {
				if n := d[side].tokens; n > 0 {
					iv[side] = float64(d[side].bytes) / float64(n)
					dv[side] = float64(d[side].dir) / float64(n)
				}
			}
			io, dir = append(io, iv), append(dir, dv)
		}
		if len(io) == 0 {
			continue
		}
		streams := plural(c, "stream", "concurrent streams")
		ioRow := newRow("disk bytes written per streamed token, "+streams+" (/proc/PID/io write_bytes)", 0, io)
		dirRow := newRow("data-dir growth per streamed token, "+streams+" (bytes)", 0, dir)
		ioRow.ZeroBaseline, dirRow.ZeroBaseline = true, true
		rep.Rows = append(rep.Rows, ioRow, dirRow)
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

func ratioOf(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
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
		case "open":
			what = append(what, fmt.Sprintf("%d sessions opened", c.OpenSessions))
		case "postgres":
			if c.Postgres != "" {
				what = append(what, "PostgreSQL append benchmark")
			}
		}
	}
	what = append(what, plural(c.Rounds, "round", "rounds")+" per side, alternating",
		fmt.Sprintf("protocols %s", strings.Join(c.Protocols, ", ")), fmt.Sprintf("agentchat ?stream=chunks %v", c.AgentchatChunks))
	h := []string{
		"loadgen: " + strings.Join(what, "; "),
		fmt.Sprintf("machine: %d CPUs (%s), %s RAM, %s, GOMAXPROCS=%d; load average %s at start, %s at end; run took %s",
			runtime.NumCPU(), cpuModel(), memTotal(), runtime.Version(), runtime.GOMAXPROCS(0), load0, loadAverage(), took.Round(time.Second)),
		"agentwire: SQLite under a fresh temp --data-dir per run, flags " + strings.Join(agentwireFlags, " "),
		"baseline: `loadgen relay`, a naive relay that passes each upstream token on as it arrives and keeps nothing",
		fmt.Sprintf("every metric is computed per round (%s); a cell is the median over the rounds and, in brackets, their range (min–max); "+
			"ratio: agentwire / baseline of each round, the median of those and their range", plural(c.Rounds, "round", "rounds")),
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
