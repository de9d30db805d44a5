package main

import (
	"context"
	"math"
	"os"
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
// agentwire and the relay. Every metric must be there and positive, and
// both sides must have delivered every token.
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
		want = append(want, "fan-out "+protoNames[p]+",")
	}
	want = append(want, "idle agentchat sessions")
	for _, c := range cfg.Concurrency {
		streams := plural(c, "stream", "concurrent streams")
		want = append(want, "disk bytes written per streamed token, "+streams, "data-dir growth per streamed token, "+streams)
	}
	for _, w := range want {
		n := 0
		for _, r := range rep.Rows {
			if strings.HasPrefix(r.Metric, w) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d rows for %q, want 1", n, w)
		}
	}
	if len(rep.Rows) != len(want) {
		t.Errorf("%d rows, want %d", len(rep.Rows), len(want))
	}
	for _, r := range rep.Rows {
		a, b := r.Values[0], r.Values[1]
		if !(a > 0) || math.IsInf(a, 0) {
			t.Errorf("%s: agentwire %v, want a positive number", r.Metric, a)
		}
		switch {
		case r.ZeroBaseline && b != 0:
			t.Errorf("%s: baseline %v, want 0 (the relay keeps nothing)", r.Metric, b)
		case !r.ZeroBaseline && (!(b > 0) || math.IsInf(b, 0)):
			t.Errorf("%s: baseline %v, want a positive number", r.Metric, b)
		}
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
