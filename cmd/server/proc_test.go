package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/tools/sandbox"
)

// The server binary, built once for the tests that run it as a process.
var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
)

func TestMain(m *testing.M) {
	sandbox.Main()
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// serverBinary builds cmd/server once per test binary and returns its path.
func serverBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the server binary; skipped with -short")
	}
	buildOnce.Do(func() {
		// go test puts its own GOROOT/bin first in the test binary's PATH.
		goTool, err := exec.LookPath("go")
		if err != nil {
			buildErr = err
			return
		}
		if binDir, buildErr = os.MkdirTemp("", "agentwire-bin-"); buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "agentwire")
		out, err := exec.Command(goTool, "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = &buildError{err: err, out: string(out)}
		}
	})
	require.NoError(t, buildErr)
	return binPath
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return "go build: " + e.err.Error() + ": " + e.out }

// proc is the server binary running as a process of its own.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	addr   string // the main listener, from the banner
	lines  chan string
	stderr *lockedBuffer
	exited chan error
	done   bool
}

// cleanEnv is the environment of a server process: no provider keys, so
// that it runs the scripted model whatever the machine sets.
func cleanEnv(extra ...string) []string {
	env := append(os.Environ(), "OPENAI_API_KEY=", "OPENAI_BASE_URL=", "ANTHROPIC_API_KEY=",
		"GEMINI_API_KEY=", "GOOGLE_API_KEY=", "AGENTWIRE_LLM=scripted")
	return append(env, extra...)
}

// startProc starts the server binary with args in dir and waits for its
// banner. The test kills it at cleanup if it is still running.
func startProc(t *testing.T, dir string, args ...string) *proc {
	t.Helper()
	return startProcEnv(t, dir, nil, args...)
}

// startProcEnv is startProc with env added to the process's environment.
func startProcEnv(t *testing.T, dir string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, lines: make(chan string, 256), stderr: &lockedBuffer{}, exited: make(chan error, 1)}
	p.cmd = exec.Command(serverBinary(t), append([]string{"--addr", "127.0.0.1:0"}, args...)...)
	p.cmd.Dir = dir
	p.cmd.Env = cleanEnv(env...)
	stdout, err := p.cmd.StdoutPipe()
	require.NoError(t, err)
	p.cmd.Stderr = p.stderr
	require.NoError(t, p.cmd.Start())
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case p.lines <- sc.Text():
			default: // nobody reads the rest
			}
		}
		close(p.lines)
		p.exited <- p.cmd.Wait()
	}()
	t.Cleanup(func() {
		if t.Failed() {
			p.dump()
		}
		p.kill()
		if t.Failed() {
			t.Logf("server %s (%v) wrote:\n%s", p.addr, args, p.stderr.String())
		}
	})

	banner := regexp.MustCompile(`agentchat\s+ws://(127\.0\.0\.1:\d+)/ws`)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for p.addr == "" {
		select {
		case l, ok := <-p.lines:
			require.True(t, ok, "the server ended before its banner; stderr: %s", p.stderr.String())
			if m := banner.FindStringSubmatch(l); m != nil {
				p.addr = m[1]
			}
		case <-ctx.Done():
			t.Fatalf("no banner; stderr: %s", p.stderr.String())
		}
	}
	return p
}

// dump makes a running server print its goroutines (SIGQUIT) and waits
// briefly for it to exit, so that a failing test shows what it was doing.
func (p *proc) dump() {
	if p.done {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGQUIT)
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	for {
		select {
		case _, ok := <-p.lines:
			if ok {
				continue
			}
			p.done = true
			<-p.exited
			return
		case <-timer.C:
			return
		}
	}
}

// kill ends the process with SIGKILL, as a crash would, and waits for it.
func (p *proc) kill() {
	if p.done {
		return
	}
	p.done = true
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	for range p.lines {
	}
	<-p.exited
}
