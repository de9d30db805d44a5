package config

import (
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestDefaults(t *testing.T) {
	c, err := Parse(nil, env(), io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:8080", c.Addr)
	assert.Equal(t, "./data", c.DataDir)
	assert.Equal(t, "./workspace", c.Workdir)
	assert.Equal(t, "suggest", c.ApprovalPolicy)
	assert.Equal(t, "auto", c.Sandbox)
	assert.Equal(t, "off", c.SandboxNetwork)
	assert.Equal(t, "session", c.AgentchatBroadcast)
	assert.Equal(t, "message", c.AgentchatStream)
	assert.Equal(t, "transcript", c.AG2Resume, "ChatUI's reading by default")
	assert.Equal(t, 10, c.MaxSteps)
	assert.Equal(t, []int{3, 5, 4}, []int{c.TotBranches, c.TotDepth, c.GraphParallel})
	assert.Equal(t, 0.8, c.CompactThreshold)
	assert.Zero(t, c.ContextWindow, "0: from the model table")
	assert.Equal(t, 10*time.Second, c.ShutdownGrace)
	assert.Equal(t, "scripted", c.Provider())
	assert.Empty(t, c.Listen)
	assert.Empty(t, c.DebugAddr, "no debug listener unless asked for")
}

func TestEnvironmentAndFlags(t *testing.T) {
	c, err := Parse(
		[]string{"--addr", "127.0.0.1:9000", "--listen", "threads=127.0.0.1:3030", "--listen=loom=127.0.0.1:3031"},
		env("AGENTWIRE_ADDR", "127.0.0.1:7000", "AGENTWIRE_APPROVAL_POLICY", "full-auto", "AGENTWIRE_DATA_DIR", "/tmp/x",
			"AGENTWIRE_AGENTCHAT_BROADCAST", "all", "OPENAI_API_KEY", "sk-test", "AGENTWIRE_COMPACT_THRESHOLD", "0.5",
			"AGENTWIRE_CONTEXT_WINDOW", "32000", "AGENTWIRE_AGENTCHAT_STREAM", "chunks", "AGENTWIRE_DEBUG_ADDR", "127.0.0.1:6060",
			"AGENTWIRE_SANDBOX", "require", "AGENTWIRE_SANDBOX_NETWORK", "on"),
		io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:9000", c.Addr, "a flag wins over its variable")
	assert.Equal(t, "full-auto", c.ApprovalPolicy)
	assert.Equal(t, "require", c.Sandbox)
	assert.Equal(t, "on", c.SandboxNetwork)
	assert.Equal(t, "/tmp/x", c.DataDir)
	assert.Equal(t, "all", c.AgentchatBroadcast)
	assert.Equal(t, "chunks", c.AgentchatStream)
	assert.Equal(t, "127.0.0.1:6060", c.DebugAddr)
	assert.Equal(t, 0.5, c.CompactThreshold)
	assert.Equal(t, 32000, c.ContextWindow)
	assert.Equal(t, map[string]string{"threads": "127.0.0.1:3030", "loom": "127.0.0.1:3031"}, c.Listen)
	assert.Equal(t, "openai", c.Provider())
}

func TestProviderChoice(t *testing.T) {
	for _, tc := range []struct {
		env  func(string) string
		args []string
		want string
	}{
		{env("ANTHROPIC_API_KEY", "a"), nil, "anthropic"},
		{env("GEMINI_API_KEY", "g"), nil, "gemini"},
		{env("GOOGLE_API_KEY", "g"), nil, "gemini"},
		{env("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1"), nil, "openai"},
		{env("OPENAI_API_KEY", "o", "ANTHROPIC_API_KEY", "a"), nil, "openai"},
		{env("OPENAI_API_KEY", "o"), []string{"--llm", "scripted"}, "scripted"},
		{env("AGENTWIRE_LLM", "gemini"), nil, "gemini"},
		{env("OPENAI_API_KEY", "o"), []string{"--scenario", "s.yaml"}, "scripted"},
	} {
		c, err := Parse(tc.args, tc.env, io.Discard)
		require.NoError(t, err)
		assert.Equal(t, tc.want, c.Provider())
	}
}

func TestInvalid(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  func(string) string
		want string
	}{
		{[]string{"--approval-policy", "yolo"}, env(), "--approval-policy"},
		{[]string{"--sandbox", "bwrap"}, env(), "--sandbox"},
		{nil, env("AGENTWIRE_SANDBOX", "danger-full-access"), "AGENTWIRE_SANDBOX"},
		{[]string{"--sandbox-network", "yes"}, env(), "--sandbox-network"},
		{[]string{"--llm", "gpt"}, env(), "--llm"},
		{[]string{"--agentchat-stream", "tokens"}, env(), "--agentchat-stream"},
		{[]string{"--coalesce-deltas", "yes"}, env(), "--coalesce-deltas"},
		{[]string{"--scenario-pacing", "fast"}, env(), "--scenario-pacing"},
		{[]string{"--ag2-resume", "after"}, env(), "--ag2-resume"},
		{nil, env("AGENTWIRE_AGENTCHAT_STREAM", "Chunks"), "AGENTWIRE_AGENTCHAT_STREAM"},
		{[]string{"--compact-threshold", "1.5"}, env(), "--compact-threshold"},
		{[]string{"--compact-threshold", "-0.1"}, env(), "--compact-threshold"},
		{[]string{"--context-window", "-5"}, env(), "--context-window"},
		{[]string{"--listen", "Bad Name=127.0.0.1:25"}, env(), "protocol name"},
		{[]string{"--listen", "threads"}, env(), "proto=addr"},
		{[]string{"--database-url", "mysql://x"}, env(), "postgres://"},
		{nil, env("AGENTWIRE_MAX_STEPS", "many"), "AGENTWIRE_MAX_STEPS"},
		{[]string{"stray"}, env(), "unexpected arguments"},
		{[]string{"--addr", "nonsense"}, env(), "--addr"},
		{[]string{"--debug-addr", "6060"}, env(), "--debug-addr"},
		{[]string{"--tot-depth", "0"}, env(), "--tot-depth"},
		{[]string{"--graph-parallel", "-1"}, env(), "--graph-parallel"},
	} {
		_, err := Parse(tc.args, tc.env, io.Discard)
		require.Error(t, err, "%v", tc.args)
		assert.Contains(t, err.Error(), tc.want)
	}
}

// TestHelpNamesEveryVariable: --help lists every flag with its AGENTWIRE_
// variable, and the variables read besides them (the model keys).
func TestHelpNamesEveryVariable(t *testing.T) {
	var out strings.Builder
	_, err := Parse([]string{"--help"}, func(string) string { return "" }, &out)
	require.ErrorIs(t, err, ErrHelp)
	for _, f := range Flags() {
		assert.Contains(t, out.String(), "--"+f+" ", "--help lacks --%s", f)
		assert.Contains(t, out.String(), EnvName(f), "--help lacks %s", EnvName(f))
	}
	for _, v := range []string{"OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "AGENTWIRE_API_KEYS", "AGENTWIRE_JWT_SECRET"} {
		assert.Contains(t, out.String(), v)
	}
}

// TestReadmeListsEveryFlag compares the README's flag table with the
// flags the server takes: every flag is documented there, and the table
// names no flag that does not exist.
func TestReadmeListsEveryFlag(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	documented := map[string]bool{}
	cell := regexp.MustCompile("`--([a-z0-9-]+)")
	for line := range strings.SplitSeq(string(readme), "\n") {
		if !strings.HasPrefix(line, "| `--") {
			continue
		}
		first := strings.SplitN(line, "|", 3)[1]
		for _, m := range cell.FindAllStringSubmatch(first, -1) {
			documented[m[1]] = true
		}
	}
	flags := Flags()
	for _, f := range flags {
		assert.True(t, documented[f], "README.md's flag table lacks --%s", f)
	}
	for f := range documented {
		assert.Contains(t, flags, f, "README.md's flag table names --%s, which is no flag", f)
	}
}

// TestInvalidVariableIsNamed: a bad value that came from the environment
// is reported under its variable's name, one from the command line under
// the flag's.
func TestInvalidVariableIsNamed(t *testing.T) {
	env := map[string]string{"AGENTWIRE_APPROVAL_POLICY": "yolo", "AGENTWIRE_MAX_STEPS": "0"}
	_, err := Parse(nil, func(k string) string { return env[k] }, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `AGENTWIRE_APPROVAL_POLICY "yolo"`)
	assert.Contains(t, err.Error(), "AGENTWIRE_MAX_STEPS must be at least 1")
	_, err = Parse([]string{"--approval-policy", "nope"}, func(k string) string { return env[k] }, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `--approval-policy "nope"`, "the command line wins, and is named")
	_, err = Parse(nil, func(k string) string {
		return map[string]string{"AGENTWIRE_MAX_STEPS": "many"}[k]
	}, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `AGENTWIRE_MAX_STEPS="many"`, "a value the flag cannot take")
}
