package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/agentwire/agentwire/internal/store/storetest"
)

// The postgres scenario runs the PostgreSQL store's append benchmark
// (BenchmarkAppend in internal/store/postgres: storetest.BenchThreads
// goroutines appending at once, against raw COPY into a plain table of the
// same shape, alternating) as a test binary of its own, once per round
// (-test.count), and reads each round's events/s of both from its output.
// It runs apart from the two sides' servers: it compares the store with
// the database, not agentwire with the relay.

const (
	storeBenchPkg     = "github.com/agentwire/agentwire/internal/store/postgres"
	storeBenchName    = "BenchmarkAppend"
	storeBenchThreads = storetest.BenchThreads
	storeBenchURLEnv  = "AGENTWIRE_TEST_POSTGRES_URL"
)

// storeBenchCommand is the go test command that runs the benchmark as cfg
// would.
func storeBenchCommand(cfg Config) string {
	return fmt.Sprintf("%s=URL go test -run '^$' -bench '^%s$' -benchtime=%dx -count=%d ./internal/store/postgres/ (x-raw is the ratio)",
		storeBenchURLEnv, storeBenchName, cfg.PostgresEvents, cfg.Rounds)
}

// buildStoreBench compiles the benchmark's test binary into dir. Like
// buildServer, it must run inside the module.
func buildStoreBench(ctx context.Context, dir string) (string, error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("no go tool to build the store benchmark with: %w", err)
	}
	bin := filepath.Join(dir, "postgres.test")
	out, err := exec.CommandContext(ctx, goTool, "test", "-c", "-o", bin, storeBenchPkg).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go test -c %s (run inside the module): %w\n%s", storeBenchPkg, err, out)
	}
	return bin, nil
}

// storeBench runs the benchmark Rounds times and records each round.
func (r *runner) storeBench(ctx context.Context) error {
	cmd := exec.CommandContext(ctx, r.cfg.StoreBench, "-test.run", "^$", "-test.bench", "^"+storeBenchName+"$",
		"-test.benchtime", strconv.Itoa(r.cfg.PostgresEvents)+"x", "-test.count", strconv.Itoa(r.cfg.Rounds))
	cmd.Dir = r.tmp
	cmd.Env = append(cleanEnv(), storeBenchURLEnv+"="+r.cfg.Postgres)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w\n%s", storeBenchName, err, out)
	}
	rounds, err := parseStoreBench(out)
	if err != nil {
		return fmt.Errorf("%w\n%s", err, out)
	}
	if len(rounds) != r.cfg.Rounds {
		return fmt.Errorf("%s: %d results, want %d\n%s", storeBenchName, len(rounds), r.cfg.Rounds, out)
	}
	r.res.mu.Lock()
	r.res.store = append(r.res.store, rounds...)
	r.res.mu.Unlock()
	return nil
}

// parseStoreBench reads the events/s and raw-events/s of every result
// line of the benchmark, as `go test -bench` prints them:
// "BenchmarkAppend-2  20000  51234 ns/op  30000 events/s  45000 raw-events/s  0.66 x-raw …".
func parseStoreBench(out []byte) ([]storeRound, error) {
	var rounds []storeRound
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || (f[0] != storeBenchName && !strings.HasPrefix(f[0], storeBenchName+"-")) {
			continue
		}
		var sr storeRound
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("%s: %q: %w", storeBenchName, f[i], err)
			}
			switch f[i+1] {
			case "events/s":
				sr.store = v
			case "raw-events/s":
				sr.raw = v
			}
		}
		if !(sr.store > 0 && sr.raw > 0) {
			return nil, fmt.Errorf("%s: no events/s and raw-events/s in %q", storeBenchName, sc.Text())
		}
		rounds = append(rounds, sr)
	}
	return rounds, nil
}
