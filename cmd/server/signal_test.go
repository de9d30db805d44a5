package main

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The built binary, on SIGTERM, closes its sockets with "going away",
// prints that it is shutting down, and exits 0.
func TestBinaryStopsOnSIGTERM(t *testing.T) {
	bin := serverBinary(t)
	dir := t.TempDir()
	cmd := exec.Command(bin, "--addr", "127.0.0.1:0", "--shutdown-grace", "2s")
	cmd.Dir = dir
	cmd.Env = cleanEnv()
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	lines := make(chan string, 64)
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
	})

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	banner := regexp.MustCompile(`agentchat\s+ws://(127\.0\.0\.1:\d+)/ws`)
	var addr string
	for addr == "" {
		select {
		case l, ok := <-lines:
			require.True(t, ok, "the server ended before its banner; stderr: %s", stderr.String())
			if m := banner.FindStringSubmatch(l); m != nil {
				addr = m[1]
			}
		case <-ctx.Done():
			t.Fatalf("no banner; stderr: %s", stderr.String())
		}
	}

	ws, _, err := websocket.Dial(ctx, "ws://"+addr+"/ws", nil)
	require.NoError(t, err)
	defer ws.CloseNow()
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))

	_, _, err = ws.Read(ctx)
	assert.Equal(t, websocket.StatusGoingAway, websocket.CloseStatus(err), "read ended with %v", err)

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
	assert.Contains(t, rest, "agentwire: shutting down")
	_, err = os.Stat(filepath.Join(dir, "data", "agentwire.db"))
	assert.NoError(t, err, "the store lives under ./data")
}
