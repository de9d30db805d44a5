// Command loadgen measures agentwire end to end against a naive relay, in
// one run, and prints a table `metric | agentwire | baseline | ratio`
// (`make bench-e2e`; docs/BENCHMARKS.md has a run).
//
// It hosts a fake OpenAI-compatible upstream that streams each reply token
// by token at a fixed rate and stamps every token when it sends it; the
// clients stamp it again when it arrives, on the same clock. Against it it
// runs two server processes in turn, each fresh for every scenario run:
// agentwire (cmd/server, built into a temp folder, SQLite in a temp
// --data-dir) and the relay (`loadgen relay`: this binary again, which
// passes every token on as it arrives and keeps nothing), and reads their
// CPU time, RSS and storage writes from /proc. Linux only.
//
// Scenarios:
//
//   - latency: 1 and 100 concurrent streams over threads (POST + SSE) and
//     agentchat (WebSocket, ?stream=chunks): added latency per token,
//     first-token latency, server CPU per delivered token, and disk bytes
//     per token;
//   - idle: 500 open agentchat sessions, RSS growth per session;
//   - fanout: one reply to 201 SSE streams of one thread (the POST and 200
//     subscribers), and to 201 sockets of one agentchat session: deliveries
//     per server CPU-second, and the last token's latency;
//   - open: 100 new sessions, 4 at a time, each with a 5-token reply
//     (agentchat: a socket that chats once and closes; threads: a POST on
//     a new thread): server CPU per session;
//   - postgres: with -postgres (or AGENTWIRE_TEST_POSTGRES_URL), the
//     PostgreSQL store's append benchmark against raw COPY
//     (internal/store/postgres BenchmarkAppend, run as a test binary).
//
// Every scenario runs -rounds times per side; every metric is computed per
// round, and the table gives the median over the rounds and their range.
//
// Usage:
//
//	go run ./cmd/loadgen [-quick] [-scenarios latency,idle,fanout,open,postgres] [-protocols threads,agentchat] [-postgres URL] …
//	go run ./cmd/loadgen relay -upstream URL [-addr 127.0.0.1:0]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "relay" {
		os.Exit(relayMain(os.Args[2:]))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "loadgen:", err)
		return 2
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "loadgen:", err)
		return 1
	}
	cfg.RelayCmd = []string{exe, "relay"}
	cfg.Progress = stderr
	rep, err := Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(stderr, "loadgen:", err)
		return 1
	}
	fmt.Fprintf(stdout, "command: loadgen %s\n", strings.Join(args, " "))
	rep.Write(stdout)
	if !rep.Complete() {
		return 1
	}
	return 0
}

// parseFlags reads the command line; -quick shrinks the sizes of every
// flag not given.
func parseFlags(args []string, stderr io.Writer) (Config, error) {
	def := DefaultConfig()
	cfg := def
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: loadgen [flags]   (or: loadgen relay -upstream URL [-addr ADDR])")
		fs.PrintDefaults()
	}
	quick := fs.Bool("quick", false, "small sizes: a run of seconds (flags given explicitly still apply)")
	fs.IntVar(&cfg.Tokens, "tokens", def.Tokens, "tokens per streamed reply")
	fs.Float64Var(&cfg.Rate, "rate", def.Rate, "tokens a second per stream (0: as fast as possible)")
	conc := fs.String("concurrency", joinInts(def.Concurrency), "concurrent streams of the latency scenarios, comma-separated")
	protos := fs.String("protocols", strings.Join(def.Protocols, ","), "protocols measured: threads, agentchat")
	scen := fs.String("scenarios", strings.Join(def.Scenarios, ","), "scenarios run: "+strings.Join(scenarioNames, ", "))
	fs.IntVar(&cfg.IdleSessions, "idle", def.IdleSessions, "agentchat sessions the idle scenario opens")
	fs.BoolVar(&cfg.IdleChat, "idle-chat", def.IdleChat, "each idle session sends one short chat (false: it only connects)")
	fs.IntVar(&cfg.FanOut, "fanout", def.FanOut, "receivers of one thread / session in the fan-out scenario")
	fs.IntVar(&cfg.OpenSessions, "open", def.OpenSessions, "sessions each run of the open scenario opens")
	fs.StringVar(&cfg.Postgres, "postgres", os.Getenv(storeBenchURLEnv), "PostgreSQL URL for the postgres scenario (the store's append benchmark; default $"+storeBenchURLEnv+"; empty: not run)")
	fs.IntVar(&cfg.PostgresEvents, "postgres-events", def.PostgresEvents, "events each round of the postgres scenario appends (its -benchtime)")
	fs.IntVar(&cfg.Rounds, "rounds", def.Rounds, "runs of each scenario per side, alternating which side goes first")
	fs.BoolVar(&cfg.AgentchatChunks, "agentchat-chunks", def.AgentchatChunks, "ask agentchat for one agent_message per chunk (?stream=chunks on the URL)")
	fs.StringVar(&cfg.ServerBin, "server-bin", "", "an agentwire binary to run (default: go build ./cmd/server)")
	fs.StringVar(&cfg.LogDir, "logs", "", "keep each server process's output (its last 64 KiB) in this folder")
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *quick {
		q := def.Quick()
		for name, apply := range map[string]func(){
			"tokens":          func() { cfg.Tokens = q.Tokens },
			"rate":            func() { cfg.Rate = q.Rate },
			"concurrency":     func() { cfg.Concurrency = q.Concurrency },
			"idle":            func() { cfg.IdleSessions = q.IdleSessions },
			"fanout":          func() { cfg.FanOut = q.FanOut },
			"open":            func() { cfg.OpenSessions = q.OpenSessions },
			"postgres-events": func() { cfg.PostgresEvents = q.PostgresEvents },
			"rounds":          func() { cfg.Rounds = q.Rounds },
		} {
			if !set[name] {
				apply()
			}
		}
	}
	if set["concurrency"] || !*quick {
		var err error
		if cfg.Concurrency, err = parseInts(*conc); err != nil {
			return Config{}, fmt.Errorf("-concurrency: %w", err)
		}
	}
	cfg.Protocols = splitList(*protos)
	cfg.Scenarios = splitList(*scen)
	return cfg, nil
}

func splitList(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}
