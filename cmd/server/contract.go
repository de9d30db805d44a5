package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentwire/agentwire/internal/config"
)

// contractDefaults are the flags contract mode sets unless the command
// line or their AGENTWIRE_ variable does: a free loopback port, the
// scripted model at full speed and a quick stop. The tools' OS sandbox is
// serve's default (auto), as everywhere: a contract server's commands are
// the scenario's, but a server that runs commands confines them. The data
// and working folders are added by contract.
var contractDefaults = [][2]string{
	{"addr", "127.0.0.1:0"},
	{"llm", "scripted"},
	{"scenario-pacing", "none"},
	{"shutdown-grace", "1s"},
}

// contract runs `agentwire contract`: a throw-away server for a frontend's
// tests. It serves every protocol on a free loopback port with the
// scripted model, keeps its threads and working folder in a temporary
// folder it removes when it exits, prints the AGENTWIRE_*=… address lines
// on stdout (and nothing else there: the banner and logs go to stderr) as
// soon as the listeners accept connections, and stops on SIGINT or
// SIGTERM.
func contract(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if slices.ContainsFunc(args, func(a string) bool { return a == "-h" || a == "-help" || a == "--help" }) {
		fmt.Fprint(stdout, contractUsage)
		// The flags, without serve's own introduction.
		var help strings.Builder
		_, err := config.Parse([]string{"--help"}, func(string) string { return "" }, &help)
		flags := help.String()
		if _, rest, ok := strings.Cut(flags, "\nFlags:\n"); ok {
			flags = rest
		}
		fmt.Fprint(stdout, "Flags (the defaults shown are agentwire serve's; contract mode's own are above):\n"+flags)
		return err
	}
	tmp, err := os.MkdirTemp("", "agentwire-contract-")
	if err != nil {
		return fmt.Errorf("create the temporary folder: %w", err)
	}
	defer os.RemoveAll(tmp)

	defaults := [][2]string{{"data-dir", filepath.Join(tmp, "data")}, {"workdir", filepath.Join(tmp, "workspace")}}
	var pre []string
	for _, d := range append(contractDefaults, defaults...) {
		// A flag's variable counts as given: a flag on the command line
		// would win over it.
		if getenv(config.EnvName(d[0])) == "" {
			pre = append(pre, "--"+d[0], d[1])
		}
	}
	cfg, err := config.Parse(append(pre, args...), getenv, stderr)
	if err != nil {
		return err
	}
	if p := cfg.Provider(); p != "scripted" {
		return fmt.Errorf("contract: --llm %s: contract mode runs the scripted model only (leave --llm out, or use `agentwire serve`)", p)
	}
	cfg.PrintAddr = true
	return serve(ctx, cfg, getenv, stdout, stderr, stderr)
}

const contractUsage = `Usage: agentwire contract [--scenario NAME|FILE] [flags]

Starts a throw-away agentwire for a frontend's contract tests in CI:
  - every protocol on a free loopback port (--addr 127.0.0.1:0);
  - the offline scripted model, whatever API keys the environment holds, playing
    --scenario (a file, a folder, or a built-in name: ag2-tour, agentchat-tour,
    threads-tour, loom-tour, agentloop-tour); without one, the built-in scenario,
    which holds every tour and demo;
  - replies at once (--scenario-pacing none; pass scenario to keep its delays);
  - threads and the tools' working folder in a new temporary folder, removed when
    it exits (unless --data-dir, --database-url or --workdir say otherwise);
  - the tools' OS sandbox as agentwire serve has it (--sandbox auto): on a
    machine without one (a CI runner without unprivileged user namespaces)
    every command asks for approval first, which changes the frames of a
    scenario that runs commands without asking; --sandbox off gives the same
    frames as a sandboxed machine (only the scenario's commands run, in the
    temporary working folder);
  - --shutdown-grace 1s.
As soon as it accepts connections it prints on stdout, and nothing else there:

  AGENTWIRE_ADDR=127.0.0.1:PORT
  AGENTWIRE_URL=http://127.0.0.1:PORT
  AGENTWIRE_AGENTCHAT_URL=ws://127.0.0.1:PORT/ws
  ... one AGENTWIRE_<PROTOCOL>_URL a protocol

(--addr-file FILE also writes these lines to FILE, whole, and removes it on exit).
The banner and the logs go to stderr. SIGINT or SIGTERM stops it; it exits 0.
Every flag of agentwire serve applies; docs/SCENARIOS.md describes the tours.

`
