package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/config"
)

// `agentwire contract` through the real binary, as a frontend's CI runs
// it: it prints where it serves on stdout (and nothing else), and in the
// --addr-file; it serves the tour it was given from a temporary folder;
// SIGTERM stops it with status 0, and the temporary folder and the
// address file are gone.
func TestContractBinary(t *testing.T) {
	bin := serverBinary(t)
	tmp := t.TempDir() // the process's TMPDIR: its temporary folder is made here
	addrFile := filepath.Join(t.TempDir(), "agentwire.env")
	cmd := exec.Command(bin, "contract", "--scenario", "agentchat-tour", "--addr-file", addrFile)
	cmd.Dir = t.TempDir()
	// An API key in the environment does not choose a real model.
	cmd.Env = append(cleanEnv("TMPDIR="+tmp, "OPENAI_API_KEY=sk-not-used"), "AGENTWIRE_LLM=")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	lines := make(chan string, 64)
	exited := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		for range lines {
		}
		<-exited
		if t.Failed() {
			t.Logf("stderr:\n%s", stderr.String())
		}
	})

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	vars := map[string]string{}
	var printed []string
	for vars["AGENTWIRE_LOOM_URL"] == "" {
		select {
		case l, ok := <-lines:
			require.True(t, ok, "the server ended before printing its addresses; stderr: %s", stderr.String())
			printed = append(printed, l)
			k, v, ok := strings.Cut(l, "=")
			require.True(t, ok, "stdout holds KEY=VALUE lines only: %q", l)
			vars[k] = v
		case <-ctx.Done():
			t.Fatalf("no addresses; stderr: %s", stderr.String())
		}
	}
	addr := vars["AGENTWIRE_ADDR"]
	host, port, err := net.SplitHostPort(addr)
	require.NoError(t, err, "AGENTWIRE_ADDR=%s", addr)
	assert.Equal(t, "127.0.0.1", host)
	assert.NotEqual(t, "0", port, "the real port, not the one asked for")
	assert.Equal(t, "http://"+addr, vars["AGENTWIRE_URL"])
	assert.Equal(t, "ws://"+addr+"/ws", vars["AGENTWIRE_AGENTCHAT_URL"])
	assert.Equal(t, "http://"+addr+"/api/v1/threads/{threadId}", vars["AGENTWIRE_THREADS_URL"])
	assert.Equal(t, "ws://"+addr+"/agentloop", vars["AGENTWIRE_AGENTLOOP_URL"])
	assert.Equal(t, "ws://"+addr+"/ws/{workflow}/{enterprise_id}/{chat_id}/{user_id}", vars["AGENTWIRE_AG2_URL"])
	file, err := os.ReadFile(addrFile)
	require.NoError(t, err, "the address file is written before the lines are printed")
	assert.Equal(t, strings.Join(printed, "\n")+"\n", string(file))

	work, err := filepath.Glob(filepath.Join(tmp, "agentwire-contract-*"))
	require.NoError(t, err)
	require.Len(t, work, 1, "one temporary folder")
	_, err = os.Stat(filepath.Join(work[0], "data", "agentwire.db"))
	require.NoError(t, err, "the store is in the temporary folder")

	// The tour's first step, through a real client.
	ws, _, err := websocket.Dial(ctx, vars["AGENTWIRE_AGENTCHAT_URL"], nil)
	require.NoError(t, err)
	defer ws.CloseNow()
	require.NoError(t, ws.Write(ctx, websocket.MessageText, []byte(`{"type":"chat","message":"agentchat tour"}`)))
	var got []string
	for {
		_, b, err := ws.Read(ctx)
		require.NoError(t, err, "frames so far: %v", got)
		var f struct{ Type, Result string }
		require.NoError(t, json.Unmarshal(b, &f))
		got = append(got, f.Type)
		if f.Type == "tool_result" {
			assert.Equal(t, "agentchat tour", f.Result, "the command ran in the working folder")
			break
		}
	}
	assert.Equal(t, []string{"user_message", "agent_thinking", "agent_message", "tool_call", "tool_result"}, got)
	_, err = os.Stat(filepath.Join(work[0], "workspace"))
	require.NoError(t, err, "the working folder is in the temporary folder")

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	var rest []string
	for l := range lines {
		rest = append(rest, l)
	}
	err = <-exited
	exited <- err // for the cleanup
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		t.Fatalf("exit code %d; stderr: %s", exitErr.ExitCode(), stderr.String())
	}
	require.NoError(t, err)
	assert.Empty(t, rest, "nothing but the addresses on stdout")
	assert.Contains(t, stderr.String(), "agentwire is serving on "+addr, "the banner goes to stderr")
	assert.Contains(t, stderr.String(), "model: scripted (offline, scenario agentchat-tour), no delays")
	assert.Contains(t, stderr.String(), "agentwire: shutting down")
	_, err = os.Stat(work[0])
	assert.ErrorIs(t, err, os.ErrNotExist, "the temporary folder is removed")
	_, err = os.Stat(addrFile)
	assert.ErrorIs(t, err, os.ErrNotExist, "the address file is removed")
	left, err := os.ReadDir(tmp)
	require.NoError(t, err)
	assert.Empty(t, left, "nothing is left in TMPDIR")
}

// A data and working folder given on the command line are the caller's:
// contract mode uses them and leaves them in place. A real model is
// refused: contract mode plays scripts only.
func TestContractKeepsGivenFolders(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // start, print, stop at once
	data, work := t.TempDir(), t.TempDir()
	var stdout, stderr bytes.Buffer
	err := dispatch(ctx, []string{"contract", "--data-dir", data, "--workdir", work}, func(string) string { return "" }, nil, &stdout, &stderr)
	require.NoError(t, err, "stderr: %s", stderr.String())
	assert.Regexp(t, regexp.MustCompile(`^AGENTWIRE_ADDR=127\.0\.0\.1:[1-9]\d*\n`), stdout.String())
	assert.NotContains(t, stdout.String(), "agentwire is serving", "the banner is on stderr")
	_, err = os.Stat(filepath.Join(data, "agentwire.db"))
	assert.NoError(t, err, "the given data folder is kept")

	stdout.Reset()
	err = dispatch(ctx, []string{"contract", "--llm", "openai"}, func(string) string { return "" }, nil, &stdout, &stderr)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "contract mode runs the scripted model only")
	assert.Empty(t, stdout.String())

	stdout.Reset()
	err = dispatch(ctx, []string{"contract", "--help"}, func(string) string { return "" }, nil, &stdout, &stderr)
	require.ErrorIs(t, err, config.ErrHelp)
	assert.Contains(t, stdout.String(), "Usage: agentwire contract")
	assert.Contains(t, stdout.String(), "--scenario-pacing")
}

// serve --addr 127.0.0.1:0 --print-addr prints the real ports, of the
// main listener and of each --listen, before the banner, which shows the
// same ones.
func TestServePrintsAddr(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	env := map[string]string{"AGENTWIRE_DATA_DIR": t.TempDir(), "AGENTWIRE_WORKDIR": t.TempDir()}
	var stdout, stderr bytes.Buffer
	err := run(ctx, []string{"--addr", "127.0.0.1:0", "--listen", "threads=127.0.0.1:0", "--print-addr"},
		func(k string) string { return env[k] }, &stdout, &stderr)
	require.NoError(t, err, "stderr: %s", stderr.String())
	out := stdout.String()
	m := regexp.MustCompile(`^AGENTWIRE_ADDR=(127\.0\.0\.1:[1-9]\d*)\n`).FindStringSubmatch(out)
	require.NotNil(t, m, "%s", out)
	own := regexp.MustCompile(`\nAGENTWIRE_THREADS_ADDR=(127\.0\.0\.1:[1-9]\d*)\n`).FindStringSubmatch(out)
	require.NotNil(t, own, "%s", out)
	assert.NotEqual(t, m[1], own[1])
	banner := out[strings.Index(out, "agentwire is serving"):]
	assert.Contains(t, banner, "agentwire is serving on "+m[1])
	assert.Contains(t, banner, "threads    also at the root of "+own[1])
}
