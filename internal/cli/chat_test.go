package cli_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/cli"
	"github.com/agentwire/agentwire/internal/server/servertest"
)

// The chat runs against real servers playing the built-in scenario
// (docs/SCENARIOS.md): "demo approval" runs `touch approved.txt`, which
// asks for approval; "demo input" asks "What's your name?".

var protocols = []string{"agentchat", "ag2", "threads", "loom", "agentloop"}

// interactive protocols answer approvals and questions; runs started over
// the others are refused such calls.
var interactive = map[string]bool{"ag2": true, "loom": true, "agentloop": true}

func noEnv(string) string { return "" }

// chat runs one `agentwire chat` with stdin as input, to its end.
func chat(t *testing.T, addr, proto, stdin string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	args = append([]string{"--protocol", proto, "--addr", addr, "--idle", "1s"}, args...)
	err := cli.RunChat(ctx, args, noEnv, cli.ChatIO{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errOut})
	t.Logf("agentwire chat %s\n%s%s", strings.Join(args, " "), out.String(), errOut.String())
	return out.String(), err
}

var threadLine = regexp.MustCompile(`(?m)^thread: (\S+) \(resume it with --thread (\S+)\)$`)

// TestChatEveryProtocol: over each protocol, a turn the scripted model
// answers, an approval and a question answered from stdin (or refused,
// where the protocol cannot ask), then a second chat that rejoins the
// thread with --thread and continues it.
func TestChatEveryProtocol(t *testing.T) {
	for _, proto := range protocols {
		t.Run(proto, func(t *testing.T) {
			srv := servertest.Start(t, servertest.Config(t), servertest.Options{})
			addr := srv.Addr("main")

			input := "hello\ndemo approval\nyes\ndemo input\nAda\n"
			if interactive[proto] {
				// A line that is no answer to the approval is refused
				// locally and the approval asked again.
				input = "hello\ndemo approval\nmaybe\nyes\ndemo input\nAda\n"
			}
			out, err := chat(t, addr, proto, input)
			require.NoError(t, err)
			m := threadLine.FindStringSubmatch(out)
			require.NotNil(t, m, "the chat names its thread first")
			thread := m[1]
			assert.Equal(t, m[1], m[2])
			assert.True(t, strings.HasPrefix(out, "thread: "), "the thread comes first")
			assert.Contains(t, out, "\nassistant: Hi! agentwire is running on its offline scripted model")
			assert.Contains(t, out, "\nassistant: This runs `touch approved.txt` with the bash tool.")
			_, statErr := os.Stat(filepath.Join(srv.Config.Workdir, "approved.txt"))
			if interactive[proto] {
				assert.Regexp(t, `(?m)^\? .*touch approved\.txt.* \[(yes|approve) \| `, out, "the approval is asked with its answers")
				assert.Regexp(t, `(?m)^error: "maybe" is not a`, out)
				assert.Contains(t, out, "\nassistant: Done: approved.txt now exists in the working folder.")
				assert.NoError(t, statErr, "the approved command ran")
				assert.Contains(t, out, "\n? What's your name?\n")
				assert.Contains(t, out, "\ntool result: ask_user (ok): Ada\n")
				assert.Contains(t, out, "\nassistant: Nice to meet you, Ada!")
			} else {
				assert.Contains(t, out, "\ntool result: bash (failed): Not run: the command `touch approved.txt` needs approval")
				assert.Contains(t, out, "\nassistant: The command did not run.")
				assert.ErrorIs(t, statErr, os.ErrNotExist)
				assert.NotContains(t, out, "\n? ")
				assert.Contains(t, out, "\nassistant: No answer came: no person is available to answer")
			}

			// Rejoin: the earlier conversation where the protocol shows
			// it, and a new turn on the same thread.
			out, err = chat(t, addr, proto, "demo tools\n", "--thread", thread)
			require.NoError(t, err)
			assert.True(t, strings.HasPrefix(out, "thread: "+thread+" (rejoined)\n"), out)
			assert.Contains(t, out, "\nassistant: `ls` listed the working folder:")
			if proto == "agentchat" {
				assert.Contains(t, out, "\nnotice: agentchat replays no history")
				// The thread is shared: the threads protocol shows that
				// both chats went to it.
				out, err = chat(t, addr, "threads", "", "--thread", thread)
				require.NoError(t, err)
			}
			assert.Contains(t, out, "\nuser: hello\n")
			assert.Contains(t, out, "\nassistant: Hi! agentwire is running")
			assert.Contains(t, out, "\nuser: demo input\n")
			if proto == "agentchat" {
				assert.Contains(t, out, "\nuser: demo tools\n")
			}
			assert.Less(t, strings.Index(out, "user: hello"), strings.Index(out, "assistant: `ls` listed"), "the history comes first")
		})
	}
}

// lockedBuffer is a chat's stdout that the test reads while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *lockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// live is a chat that runs while the test types into it and presses
// Ctrl-C.
type live struct {
	t    *testing.T
	in   *io.PipeWriter
	out  *lockedBuffer
	intr chan struct{}
	done chan error
}

func startChat(t *testing.T, addr, proto string) *live {
	t.Helper()
	r, w := io.Pipe()
	l := &live{t: t, in: w, out: &lockedBuffer{}, intr: make(chan struct{}), done: make(chan error, 1)}
	go func() {
		l.done <- cli.RunChat(t.Context(), []string{"--protocol", proto, "--addr", addr}, noEnv,
			cli.ChatIO{Stdin: r, Stdout: l.out, Stderr: l.out, Interrupts: l.intr})
	}()
	t.Cleanup(func() {
		w.Close()
		select {
		case <-l.done:
		case <-time.After(time.Minute):
			t.Error("the chat did not end")
		}
		t.Logf("chat output:\n%s", l.out.String())
	})
	return l
}

func (l *live) say(line string) {
	_, err := io.WriteString(l.in, line+"\n")
	require.NoError(l.t, err)
}

func (l *live) waitFor(s string) {
	l.t.Helper()
	require.Eventually(l.t, func() bool { return strings.Contains(l.out.String(), s) }, time.Minute, 10*time.Millisecond,
		"waiting for %q in:\n%s", s, l.out.String())
}

func (l *live) interrupt() {
	select {
	case l.intr <- struct{}{}:
	case <-time.After(time.Minute):
		l.t.Fatal("the chat does not take interrupts")
	}
}

func (l *live) end() error {
	l.in.Close()
	select {
	case err := <-l.done:
		l.done <- err
		return err
	case <-time.After(time.Minute):
		l.t.Fatal("the chat did not end")
		return nil
	}
}

// Ctrl-C cancels a Loom run as it streams; the chat then takes the next
// line; at the end of input it exits cleanly.
func TestChatInterruptCancelsLoomRun(t *testing.T) {
	srv := servertest.Start(t, servertest.Config(t), servertest.Options{})
	l := startChat(t, srv.Addr("main"), "loom")
	l.say("demo long")
	l.waitFor("assistant: Here is a long reply")
	l.interrupt()
	l.waitFor("notice: stopping the turn")
	l.waitFor("error: cancelled")
	assert.NotContains(t, l.out.String(), "That's the end of the long demo.")
	l.say("hello")
	l.waitFor("assistant: Hi! agentwire is running")
	require.NoError(t, l.end())
}

// Ctrl-C while AgentLoop waits for an approval answers no-exit: the
// command does not run and the turn ends.
func TestChatInterruptDeniesAgentLoopApproval(t *testing.T) {
	srv := servertest.Start(t, servertest.Config(t), servertest.Options{})
	l := startChat(t, srv.Addr("main"), "agentloop")
	l.say("demo approval")
	l.waitFor("? run `touch approved.txt`?")
	l.interrupt()
	l.waitFor("notice: stopping the turn")
	require.NoError(t, l.end())
	assert.NotContains(t, l.out.String(), "Done: approved.txt")
	_, err := os.Stat(filepath.Join(srv.Config.Workdir, "approved.txt"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}

// Where the protocol cannot stop a run, Ctrl-C says so, and a second one
// exits with an error.
func TestChatSecondInterruptExits(t *testing.T) {
	srv := servertest.Start(t, servertest.Config(t), servertest.Options{})
	l := startChat(t, srv.Addr("main"), "threads")
	l.say("demo long")
	l.waitFor("assistant: Here is a long reply")
	l.interrupt()
	l.waitFor("notice: threads cannot stop a running turn; Ctrl-C again exits")
	l.interrupt()
	err := l.end()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "interrupted")
}

// Credentials: under --auth keys a chat without a token is refused with
// the server's reason, and one with a token works, on every protocol.
func TestChatCredentials(t *testing.T) {
	key := "ck-" + uuid.NewString()
	file := filepath.Join(t.TempDir(), "keys")
	require.NoError(t, os.WriteFile(file, []byte("carol="+key+"\n"), 0o600))
	srv := servertest.Start(t, servertest.Config(t, "--auth", "keys", "--api-keys-file", file), servertest.Options{})
	for _, proto := range protocols {
		t.Run(proto, func(t *testing.T) {
			_, err := chat(t, srv.Addr("main"), proto, "hello\n")
			require.Error(t, err)
			assert.Contains(t, err.Error(), "cannot connect")
			assert.Contains(t, err.Error(), "401")

			out, err := chat(t, srv.Addr("main"), proto, "hello\n", "--token", key)
			require.NoError(t, err)
			assert.Contains(t, out, "\nassistant: Hi! agentwire is running")
		})
	}
}

// A server that is not there: a clear error, for the exit status.
func TestChatNoServer(t *testing.T) {
	for _, proto := range protocols {
		_, err := chat(t, "127.0.0.1:1", proto, "hello\n")
		require.Error(t, err, proto)
		assert.Contains(t, err.Error(), "chat: cannot connect to the "+proto+" server at http://127.0.0.1:1")
	}
}

func TestChatFlags(t *testing.T) {
	run := func(args ...string) error {
		return cli.RunChat(t.Context(), args, noEnv, cli.ChatIO{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: io.Discard})
	}
	assert.ErrorContains(t, run(), "--protocol is required")
	assert.ErrorContains(t, run("--protocol", "irc"), "want agentchat, ag2, threads, loom or agentloop")
	assert.ErrorContains(t, run("--protocol", "threads", "--thread", "not-a-uuid"), "UUID")
	assert.ErrorContains(t, run("--protocol", "loom", "--url", "ftp://x"), "scheme")
	assert.ErrorContains(t, run("--protocol", "loom", "extra"), "unexpected argument")
}

// A server that restarts mid-turn: the AG2 chat, whose socket the server
// closes with 1001 (going away), reconnects to the restarted server and
// resumes after the last seq it saw (client.resume); it shows the rest of
// the answer (the turn ran to its end in the shutdown's grace) once.
func TestChatAG2ReconnectsAfterRestart(t *testing.T) {
	first := servertest.Start(t, servertest.Config(t), servertest.Options{})
	addr := first.Addr("main")
	l := startChat(t, addr, "ag2")
	l.say("demo long")
	l.waitFor("assistant: Here is a long reply")
	first.Stop()
	servertest.Start(t, servertest.Config(t, "--addr", addr, "--data-dir", first.Config.DataDir, "--workdir", first.Config.Workdir), servertest.Options{})
	l.waitFor("That's the end of the long demo.")
	l.say("hello")
	l.waitFor("assistant: Hi! agentwire is running")
	require.NoError(t, l.end())
	out := l.out.String()
	assert.Regexp(t, `notice: the socket closed \(.*\(1001\)\); reconnecting to resume after seq \d+`, out)
	assert.Equal(t, 1, strings.Count(out, "That's the end of the long demo."), "the end of the answer shows once")
}

// proxy forwards TCP connections to a server until cut: the network
// between the chat and the server.
type proxy struct {
	ln    net.Listener
	to    string
	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func newProxy(t *testing.T, to string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &proxy{ln: ln, to: to}
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", to)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			p.wg.Go(func() { _, _ = io.Copy(s, c); s.Close() })
			p.wg.Go(func() { _, _ = io.Copy(c, s); c.Close() })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		p.cut()
		p.wg.Wait()
	})
	return p
}

// cut breaks every connection open now.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// A connection that breaks mid-turn: the threads chat resumes the stream
// from its last event id (Last-Event-ID), the AG2 chat reconnects and
// resumes after its last seq; each shows the rest of the answer, once.
func TestChatResumesAfterNetworkBreak(t *testing.T) {
	for _, proto := range []string{"threads", "ag2"} {
		t.Run(proto, func(t *testing.T) {
			srv := servertest.Start(t, servertest.Config(t), servertest.Options{})
			p := newProxy(t, srv.Addr("main"))
			l := startChat(t, p.ln.Addr().String(), proto)
			l.say("demo long")
			l.waitFor("assistant: Here is a long reply")
			p.cut()
			l.waitFor("That's the end of the long demo.")
			l.say("hello")
			l.waitFor("assistant: Hi! agentwire is running")
			require.NoError(t, l.end())
			out := l.out.String()
			if proto == "threads" {
				assert.Regexp(t, `notice: the stream broke \(.*\); resuming after event \d+`, out)
			} else {
				assert.Regexp(t, `notice: the socket closed \(.*\); reconnecting to resume after seq \d+`, out)
			}
			assert.Equal(t, 1, strings.Count(out, "That's the end of the long demo."), "the end of the answer shows once")
			assert.Equal(t, 1, strings.Count(out, "## Why a scripted model"), "no piece of the answer shows twice")
		})
	}
}
