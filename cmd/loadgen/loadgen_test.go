package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// The test binary is also the relay: Run starts it again with this
// variable set, as the loadgen binary starts itself with `relay`.
const relayEnv = "LOADGEN_TEST_RELAY"

func TestMain(m *testing.M) {
	if os.Getenv(relayEnv) == "1" {
		os.Exit(relayMain(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// The whole tool in -quick mode against real processes: a freshly built
// agentwire and the relay. Every metric must be there, with a positive
// value in every round, and both sides must have delivered every token.
// With AGENTWIRE_TEST_POSTGRES_URL set it runs the store's append
// benchmark too; without, the report must say how to.
func TestQuickRunAgainstRealProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/server and runs it and the relay as processes; skipped with -short")
	}
	if _, err := os.Stat("/proc/self/io"); err != nil {
		t.Skipf("the loadgen reads /proc (Linux only): %v", err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig().Quick()
	cfg.RelayCmd = []string{exe}
	cfg.RelayEnv = []string{relayEnv + "=1"}
	cfg.Progress = testWriter{t}
	// Built before the run, and not under its deadline: on a machine busy
	// compiling other packages the build alone can take minutes.
	t.Log("building agentwire (go build ./cmd/server)")
	if cfg.ServerBin, err = buildServer(t.Context(), t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if cfg.Postgres = os.Getenv(storeBenchURLEnv); cfg.Postgres != "" {
		t.Log("building the store benchmark")
		if cfg.StoreBench, err = buildStoreBench(t.Context(), t.TempDir()); err != nil {
			t.Fatal(err)
		}
	}
	if cfg.Rounds < 2 {
		t.Fatalf("quick runs %d rounds; the spread needs 2", cfg.Rounds)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	rep.Write(&out)
	t.Log("\n" + out.String())

	if !rep.Complete() {
		t.Errorf("not every token was delivered: agentwire %d of %d, relay %d of %d; %v",
			rep.Delivered[0], rep.Expected[0], rep.Delivered[1], rep.Expected[1], rep.Incomplete)
	}
	for side := range 2 {
		if rep.Expected[side] == 0 {
			t.Errorf("%s: no tokens were expected", sideNames[side])
		}
	}

	want := []string{}
	for _, p := range cfg.Protocols {
		for _, c := range cfg.Concurrency {
			name := protoNames[p] + ", " + plural(c, "stream", "streams")
			for _, m := range []string{"added latency per token p50", "added latency per token p99",
				"first-token latency p50", "request to upstream call p50", "server CPU per delivered token"} {
				want = append(want, name+": "+m)
			}
		}
		fan := fmt.Sprintf("fan-out %s, %d ", protoNames[p], cfg.FanOut)
		want = append(want, fan, fan, "opening a session, "+protoNames[p]+" (")
	}
	want = append(want, "idle agentchat sessions")
	if cfg.Postgres != "" {
		want = append(want, "PostgreSQL store append vs raw COPY")
	} else if !slices.ContainsFunc(rep.Notes, func(n string) bool { return strings.HasPrefix(n, "PostgreSQL append vs raw COPY: not run") }) {
		t.Errorf("no note on the PostgreSQL benchmark not run: %q", rep.Notes)
	}
	for _, c := range cfg.Concurrency {
		streams := plural(c, "stream", "concurrent streams")
		want = append(want, "disk bytes written per streamed token, "+streams, "data-dir growth per streamed token, "+streams)
	}
	wantN := map[string]int{}
	for _, w := range want {
		wantN[w]++
	}
	for w, n := range wantN {
		got := 0
		for _, r := range rep.Rows {
			if strings.HasPrefix(r.Metric, w) {
				got++
			}
		}
		if got != n {
			t.Errorf("%d rows for %q, want %d", got, w, n)
		}
	}
	if len(rep.Rows) != len(want) {
		t.Errorf("%d rows, want %d", len(rep.Rows), len(want))
	}
	for _, r := range rep.Rows {
		if len(r.Rounds) != cfg.Rounds {
			t.Errorf("%s: %d rounds, want %d", r.Metric, len(r.Rounds), cfg.Rounds)
		}
		for i, v := range append([][2]float64{r.Values}, r.Rounds...) {
			what := "median"
			if i > 0 {
				what = fmt.Sprintf("round %d", i)
			}
			a, b := v[0], v[1]
			if !(a > 0) || math.IsInf(a, 0) {
				t.Errorf("%s, %s: agentwire %v, want a positive number", r.Metric, what, a)
			}
			switch {
			case r.ZeroBaseline && b != 0:
				t.Errorf("%s, %s: baseline %v, want 0 (the relay keeps nothing)", r.Metric, what, b)
			case !r.ZeroBaseline && (!(b > 0) || math.IsInf(b, 0)):
				t.Errorf("%s, %s: baseline %v, want a positive number", r.Metric, what, b)
			}
		}
		if !r.ZeroBaseline && len(r.Ratios()) != cfg.Rounds {
			t.Errorf("%s: %d ratios, want one per round", r.Metric, len(r.Ratios()))
		}
	}
	// Every row of the table shows the range of its rounds.
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "| ") && !strings.HasPrefix(line, "| metric") && !strings.HasPrefix(line, "| ---") &&
			strings.Count(line, "–") < 2 {
			t.Errorf("a row without its range: %s", line)
		}
	}
}

func TestReportShowsMedianAndRange(t *testing.T) {
	rep := &Report{Rows: []Row{
		newRow("cpu (µs)", 1, [][2]float64{{300, 100}, {200, 100}, {450, 150}}),
		func() Row {
			r := newRow("disk (bytes)", 0, [][2]float64{{1000, 0}, {3000, 0}})
			r.ZeroBaseline = true
			return r
		}(),
		newRow("one round", 2, [][2]float64{{1.5, 0.5}}),
	}}
	var out strings.Builder
	rep.Write(&out)
	for _, want := range []string{
		// ratios 3, 2 and 3: median 3; values' medians 300 and 100.
		"| cpu (µs) | 300.0 (200.0–450.0) | 100.0 (100.0–150.0) | 3.00× (2.00–3.00) |",
		"| disk (bytes) | 2,000 (1,000–3,000) | 0 (0–0) | n/a (baseline 0) |",
		"| one round | 1.50 | 0.50 | 3.00× |",
	} {
		if !strings.Contains(out.String(), want+"\n") {
			t.Errorf("no line %q in\n%s", want, out.String())
		}
	}
	if r := rep.Rows[0]; r.Values != [2]float64{300, 100} || r.Ratio() != 3 {
		t.Errorf("row 0: values %v, ratio %v", r.Values, r.Ratio())
	}
	if r := rep.Rows[1]; !math.IsNaN(r.Ratio()) {
		t.Errorf("ratio over a zero baseline: %v, want NaN", r.Ratio())
	}
}

func TestParseStoreBench(t *testing.T) {
	out := []byte(`goos: linux
goarch: amd64
pkg: github.com/agentwire/agentwire/internal/store/postgres
cpu: AMD EPYC
BenchmarkAppend-2   	   20000	     41633 ns/op	     24019 events/s	         0.6612 p50-ms	         7.100 p99-ms	     36327 raw-events/s	         0.6612 x-raw
BenchmarkAppend-2   	   20000	     40000 ns/op	     25000 events/s	         0.6 p50-ms	         7 p99-ms	     50000 raw-events/s	         0.5 x-raw
PASS
`)
	got, err := parseStoreBench(out)
	if err != nil {
		t.Fatal(err)
	}
	want := []storeRound{{24019, 36327}, {25000, 50000}}
	if !slices.Equal(got, want) {
		t.Errorf("parsed %v, want %v", got, want)
	}
	if _, err := parseStoreBench([]byte("BenchmarkAppend-2   20000   41633 ns/op\n")); err == nil {
		t.Error("a result line without events/s parsed")
	}
}

// testWriter logs the tool's progress lines.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func TestParseFlagsQuickKeepsExplicitFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"-quick", "-tokens", "7", "-concurrency", "3,4", "-scenarios", "latency"}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	q := DefaultConfig().Quick()
	if cfg.Tokens != 7 || cfg.Rate != q.Rate || cfg.Rounds != q.Rounds || cfg.FanOut != q.FanOut {
		t.Errorf("quick with -tokens 7: %+v", cfg)
	}
	if len(cfg.Concurrency) != 2 || cfg.Concurrency[0] != 3 || cfg.Concurrency[1] != 4 {
		t.Errorf("concurrency %v, want [3 4]", cfg.Concurrency)
	}
	if len(cfg.Scenarios) != 1 || cfg.Scenarios[0] != "latency" {
		t.Errorf("scenarios %v", cfg.Scenarios)
	}
	def, err := parseFlags(nil, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	if d := DefaultConfig(); def.Tokens != d.Tokens || def.Rate != d.Rate || len(def.Concurrency) != len(d.Concurrency) {
		t.Errorf("defaults: %+v", def)
	}
}

func TestParseToken(t *testing.T) {
	for _, tc := range []struct {
		in  string
		id  int64
		idx int
		ok  bool
	}{
		{"s12.0", 12, 0, true},
		{"s1.199", 1, 199, true},
		{"s.1", 0, 0, false},
		{"x1.2", 0, 0, false},
		{"s1", 0, 0, false},
		{"s1.x", 0, 0, false},
	} {
		id, idx, ok := parseToken(tc.in)
		if id != tc.id || idx != tc.idx || ok != tc.ok {
			t.Errorf("parseToken(%q) = %d, %d, %v", tc.in, id, idx, ok)
		}
	}
}
