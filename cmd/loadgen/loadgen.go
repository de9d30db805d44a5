package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// Config is one run of the load tool.
type Config struct {
	Tokens          int      // tokens per stream
	Rate            float64  // tokens a second per stream
	Concurrency     []int    // concurrent streams of the latency scenarios
	Protocols       []string // threads, agentchat
	Scenarios       []string // latency, idle, fanout, open, postgres
	IdleSessions    int      // agentchat sessions the idle scenario opens
	IdleChat        bool     // each idle session sends one short chat
	FanOut          int      // receivers of one thread / session in the fan-out scenario
	OpenSessions    int      // sessions the open scenario opens per run
	Postgres        string   // PostgreSQL URL for the store's append benchmark; empty: not run
	PostgresEvents  int      // events per round of that benchmark (its -benchtime)
	Rounds          int      // each scenario runs this many times per side, alternating which goes first
	AgentchatChunks bool     // ask agentchat for one frame per chunk (?stream=chunks)

	ServerBin  string   // a built cmd/server; empty: go build it
	StoreBench string   // a built test binary of internal/store/postgres; empty: go test -c it
	RelayCmd   []string // how to start the relay; its flags are appended
	RelayEnv   []string // added to the relay's environment
	LogDir     string   // when set, each server process's output (its last 64 KiB) is kept here

	Progress io.Writer // progress lines; nil: none
}

// DefaultConfig is a run of a few minutes.
func DefaultConfig() Config {
	return Config{
		Tokens: 200, Rate: 50, Concurrency: []int{1, 100},
		Protocols: []string{"threads", "agentchat"}, Scenarios: []string{"latency", "idle", "fanout", "open", "postgres"},
		IdleSessions: 500, IdleChat: true, FanOut: 201, OpenSessions: 100, PostgresEvents: 20000,
		Rounds: 3, AgentchatChunks: true,
	}
}

// scenarioNames are the scenarios a run may name, in the order they run.
var scenarioNames = []string{"latency", "idle", "fanout", "open", "postgres"}

// Quick shrinks c to a run of seconds.
func (c Config) Quick() Config {
	c.Tokens, c.Rate, c.Concurrency = 20, 200, []int{1, 8}
	c.IdleSessions, c.FanOut, c.OpenSessions, c.PostgresEvents, c.Rounds = 30, 12, 10, 5000, 2
	return c
}

func (c Config) validate() error {
	var errs []error
	if c.Tokens < 1 {
		errs = append(errs, errors.New("tokens must be at least 1"))
	}
	if c.Rate < 0 {
		errs = append(errs, errors.New("rate must not be negative"))
	}
	if c.Rounds < 1 {
		errs = append(errs, errors.New("rounds must be at least 1"))
	}
	for _, n := range c.Concurrency {
		if n < 1 {
			errs = append(errs, fmt.Errorf("concurrency %d: must be at least 1", n))
		}
	}
	for _, p := range c.Protocols {
		if p != "threads" && p != "agentchat" {
			errs = append(errs, fmt.Errorf("protocol %q: want threads or agentchat", p))
		}
	}
	for _, s := range c.Scenarios {
		if !slices.Contains(scenarioNames, s) {
			errs = append(errs, fmt.Errorf("scenario %q: want one of %s", s, strings.Join(scenarioNames, ", ")))
		}
	}
	if slices.Contains(c.Scenarios, "idle") && c.IdleSessions < 1 {
		errs = append(errs, errors.New("idle sessions must be at least 1"))
	}
	if slices.Contains(c.Scenarios, "fanout") && c.FanOut < 2 {
		errs = append(errs, errors.New("fan-out must be at least 2"))
	}
	if slices.Contains(c.Scenarios, "open") && c.OpenSessions < 1 {
		errs = append(errs, errors.New("open sessions must be at least 1"))
	}
	if slices.Contains(c.Scenarios, "postgres") && c.Postgres != "" && c.PostgresEvents < 1 {
		errs = append(errs, errors.New("postgres events must be at least 1"))
	}
	if len(c.RelayCmd) == 0 {
		errs = append(errs, errors.New("no relay command"))
	}
	return errors.Join(errs...)
}

// The two sides every scenario runs against.
const (
	sideAgentwire = iota
	sideRelay
)

var sideNames = [2]string{"agentwire", "relay"}

// runner runs the scenarios of one Config.
type runner struct {
	cfg  Config
	clk  clock
	up   *upstream
	bin  string // the agentwire binary
	tmp  string
	hc   *http.Client
	prog io.Writer
	res  *results
}

// Run measures agentwire against the relay as cfg says and returns the
// report. Every process and goroutine it starts has ended when it returns.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if _, err := os.Stat("/proc/self/io"); err != nil {
		return nil, fmt.Errorf("the loadgen measures processes through /proc (Linux): %w", err)
	}
	if cfg.LogDir != "" {
		if err := os.MkdirAll(cfg.LogDir, 0o755); err != nil {
			return nil, err
		}
	}
	tmp, err := os.MkdirTemp("", "loadgen-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	r := &runner{cfg: cfg, clk: newClock(), tmp: tmp, prog: cfg.Progress, res: newResults()}
	if r.prog == nil {
		r.prog = io.Discard
	}
	started := time.Now()
	load0 := loadAverage()
	if r.bin = cfg.ServerBin; r.bin == "" {
		r.logf("building agentwire (go build ./cmd/server)")
		if r.bin, err = buildServer(ctx, tmp); err != nil {
			return nil, err
		}
	}
	if r.cfg.StoreBench == "" && r.cfg.Postgres != "" && slices.Contains(cfg.Scenarios, "postgres") {
		r.logf("building the store benchmark (go test -c %s)", storeBenchPkg)
		if r.cfg.StoreBench, err = buildStoreBench(ctx, tmp); err != nil {
			return nil, err
		}
	}
	if r.up, err = startUpstream(r.clk); err != nil {
		return nil, err
	}
	defer r.up.close()
	tr := &http.Transport{MaxIdleConns: 8192, MaxIdleConnsPerHost: 8192, IdleConnTimeout: 30 * time.Second}
	defer tr.CloseIdleConnections()
	r.hc = &http.Client{Transport: tr}

	if err := r.all(ctx); err != nil {
		return nil, err
	}
	rep := r.res.report(cfg)
	rep.Header = r.header(load0, time.Since(started))
	if n := r.up.unknown.Load(); n > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("the upstream got %d requests that named no stream", n))
	}
	if n := r.up.duplicate.Load(); n > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("the upstream got %d repeated requests for a stream it had served", n))
	}
	return rep, nil
}

// all runs every scenario; each one runs Rounds times per side,
// alternating which side goes first (A B, B A, …), each time against
// fresh processes.
func (r *runner) all(ctx context.Context) error {
	type job struct {
		name string
		run  func(ctx context.Context, t *target) error
		once func(ctx context.Context) error // instead of run: not a side's server
	}
	var jobs []job
	for _, sc := range r.cfg.Scenarios {
		switch sc {
		case "latency":
			for _, p := range r.cfg.Protocols {
				for _, c := range r.cfg.Concurrency {
					jobs = append(jobs, job{name: fmt.Sprintf("latency %s c=%d", p, c), run: func(ctx context.Context, t *target) error {
						return r.latency(ctx, t, p, c)
					}})
				}
			}
		case "idle":
			jobs = append(jobs, job{name: fmt.Sprintf("idle agentchat n=%d", r.cfg.IdleSessions), run: r.idle})
		case "fanout":
			for _, p := range r.cfg.Protocols {
				jobs = append(jobs, job{name: fmt.Sprintf("fan-out %s n=%d", p, r.cfg.FanOut), run: func(ctx context.Context, t *target) error {
					if p == "threads" {
						return r.fanThreads(ctx, t)
					}
					return r.fanChat(ctx, t)
				}})
			}
		case "open":
			for _, p := range r.cfg.Protocols {
				jobs = append(jobs, job{name: fmt.Sprintf("open %s n=%d", p, r.cfg.OpenSessions), run: func(ctx context.Context, t *target) error {
					return r.open(ctx, t, p)
				}})
			}
		case "postgres":
			if r.cfg.Postgres != "" {
				jobs = append(jobs, job{name: "postgres append", once: r.storeBench})
			}
		}
	}
	for _, j := range jobs {
		if j.once != nil {
			began := time.Now()
			if err := j.once(ctx); err != nil {
				return fmt.Errorf("%s: %w", j.name, err)
			}
			r.logf("%-26s %d rounds          %5.1fs", j.name, r.cfg.Rounds, time.Since(began).Seconds())
			continue
		}
		for round := range r.cfg.Rounds {
			order := []int{sideAgentwire, sideRelay}
			if round%2 == 1 {
				order = []int{sideRelay, sideAgentwire}
			}
			for _, side := range order {
				if err := ctx.Err(); err != nil {
					return err
				}
				began := time.Now()
				logName := fmt.Sprintf("%s-round%d-%s.log", strings.NewReplacer(" ", "-", "=", "").Replace(j.name), round+1, sideNames[side])
				if err := r.withTarget(ctx, side, round, logName, j.run); err != nil {
					return fmt.Errorf("%s on %s: %w", j.name, sideNames[side], err)
				}
				r.logf("%-26s round %d  %-9s  %5.1fs", j.name, round+1, sideNames[side], time.Since(began).Seconds())
			}
		}
	}
	return nil
}

func (r *runner) logf(format string, args ...any) {
	fmt.Fprintf(r.prog, "loadgen: "+format+"\n", args...)
}

// target is a running server under test.
type target struct {
	side    int
	round   int // which round of its scenario this run is
	proc    *child
	base    string // http://host:port
	dataDir string // agentwire's; "" for the relay
}

func (t *target) wsURL(chunks bool) string {
	u := "ws" + strings.TrimPrefix(t.base, "http") + "/ws"
	if chunks {
		u += "?stream=chunks"
	}
	return u
}

func (t *target) stats() (procStats, error) {
	if err := t.proc.running(); err != nil {
		return procStats{}, err
	}
	return readProcStats(t.proc.pid())
}

// withTarget starts a fresh process of side, runs fn against it, and
// stops it whatever happens. round is the round of the scenario it runs.
func (r *runner) withTarget(ctx context.Context, side, round int, logName string, fn func(context.Context, *target) error) error {
	t, err := r.start(ctx, side)
	if err != nil {
		return err
	}
	t.round = round
	defer func() {
		t.proc.stop()
		if r.cfg.LogDir != "" {
			_ = os.WriteFile(filepath.Join(r.cfg.LogDir, logName), []byte(t.proc.out.String()), 0o644)
		}
		if t.dataDir != "" {
			_ = os.RemoveAll(filepath.Dir(t.dataDir))
		}
	}()
	pctx, stopProbe := context.WithCancel(ctx)
	var (
		probe  sync.WaitGroup
		sample probeSamples
	)
	probe.Go(func() { sample = probeMachine(pctx, r.tmp) })
	err = fn(ctx, t)
	stopProbe()
	probe.Wait()
	r.res.addProbe(side, sample)
	if err != nil {
		if perr := t.proc.running(); perr != nil {
			return errors.Join(err, perr)
		}
		return fmt.Errorf("%w\n%s's last output:\n%s", err, sideNames[side], t.proc.out.String())
	}
	return nil
}

var (
	agentwireAddrRE = regexp.MustCompile(`agentwire is serving on (\S+)`)
	relayAddrRE     = regexp.MustCompile(`relay listening on (\S+)`)
)

// agentwireFlags are the flags agentwire runs with besides its addresses
// and folders: the fake upstream as an OpenAI-compatible model, no
// authentication (loopback), and no run-rate or connection limits, which
// the scenarios' hundreds of sessions from one address would hit.
var agentwireFlags = []string{
	"--llm", "openai", "--model", "loadgen", "--auth", "none", "--run-rate", "0",
	"--max-conns", "100000", "--max-conns-per-ip", "100000", "--shutdown-grace", "2s",
}

func (r *runner) start(ctx context.Context, side int) (*target, error) {
	if side == sideRelay {
		argv := append(slices.Clone(r.cfg.RelayCmd), "-addr", "127.0.0.1:0", "-upstream", r.up.baseURL())
		p, err := startChild(ctx, "relay", argv, append(os.Environ(), r.cfg.RelayEnv...), "", relayAddrRE)
		if err != nil {
			return nil, err
		}
		t := &target{side: side, proc: p, base: "http://" + p.addr}
		if err := r.waitReady(ctx, t); err != nil {
			p.stop()
			return nil, err
		}
		return t, nil
	}
	dir, err := os.MkdirTemp(r.tmp, "agentwire-")
	if err != nil {
		return nil, err
	}
	data, work := filepath.Join(dir, "data"), filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		return nil, err
	}
	argv := append([]string{r.bin, "--addr", "127.0.0.1:0", "--data-dir", data, "--workdir", work}, agentwireFlags...)
	env := append(cleanEnv(), "OPENAI_BASE_URL="+r.up.baseURL(), "OPENAI_API_KEY=loadgen")
	p, err := startChild(ctx, "agentwire", argv, env, dir, agentwireAddrRE)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	t := &target{side: side, proc: p, base: "http://" + p.addr, dataDir: data}
	if err := r.waitReady(ctx, t); err != nil {
		p.stop()
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return t, nil
}

// cleanEnv is the loadgen's environment without anything that would
// configure agentwire otherwise: AGENTWIRE_* and the model providers' keys.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "AGENTWIRE_") || strings.HasPrefix(k, "OPENAI_") || strings.HasPrefix(k, "ANTHROPIC_") ||
			strings.HasPrefix(k, "GEMINI_") || k == "GOOGLE_API_KEY" {
			continue
		}
		env = append(env, kv)
	}
	return env
}

func (r *runner) waitReady(ctx context.Context, t *target) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.base+"/readyz", nil)
		if err != nil {
			return err
		}
		resp, err := r.hc.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s at %s not ready after 30s (%v)", sideNames[t.side], t.base, err)
		}
		if err := t.proc.running(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// buildServer builds cmd/server into dir. The loadgen must run inside the
// module (as `go run ./cmd/loadgen` and its test do).
func buildServer(ctx context.Context, dir string) (string, error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("no go tool to build cmd/server with (put it on PATH, or pass -server-bin): %w", err)
	}
	bin := filepath.Join(dir, "agentwire")
	out, err := exec.CommandContext(ctx, goTool, "build", "-o", bin, "github.com/agentwire/agentwire/cmd/server").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build cmd/server (run inside the module, or pass -server-bin): %w\n%s", err, out)
	}
	return bin, nil
}

// forEach runs fn(0..n-1) with at most par at once and returns the first
// error; after one, the rest are not started.
func forEach(ctx context.Context, n, par int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, par)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for i := range n {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := fn(ctx, i); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
				cancel()
			}
		})
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
