package builtin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/agentwire/agentwire/internal/tools"
	"github.com/agentwire/agentwire/internal/tools/sandbox"
)

// drainGrace bounds how long output is still read after a command's process
// group was killed: a process that left the group (setsid) may hold the
// pipes open forever.
const drainGrace = 2 * time.Second

// safeEnv are the variables bash inherits from the server by default.
var safeEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TZ", "TMPDIR"}

type bashArgs struct {
	Command string `json:"command"`
}

func bashTool(root *sandbox.Root, opts Options) tools.Tool {
	shell := opts.Shell
	if shell == "" {
		shell = "sh"
		if p, err := exec.LookPath("bash"); err == nil {
			shell = p
		}
	}
	env := opts.Env
	if env == nil {
		for _, k := range safeEnv {
			if v, ok := os.LookupEnv(k); ok {
				env = append(env, k+"="+v)
			}
		}
	}
	r := &runner{dir: root.Dir(), shell: shell, env: env, timeout: opts.CommandTimeout, maxOutput: opts.MaxOutput, box: opts.Sandbox}
	return &tool[bashArgs]{
		name: "bash",
		desc: fmt.Sprintf("Run a shell command in the working folder (%s -c). Output streams as it comes; the command is stopped after %s. stdin is empty. %s",
			shell, opts.CommandTimeout, sandboxNote(opts.Sandbox)),
		schema: `{"type":"object","properties":{"command":{"type":"string","description":"The command line"}},` +
			`"required":["command"],"additionalProperties":false}`,
		max: tools.EffectCommand,
		classify: func(a bashArgs) tools.Class {
			if patch, ok := tools.ApplyPatchCommand(a.Command); ok {
				return patchClass(patch)
			}
			return tools.ClassifyShell(a.Command)
		},
		run: func(ctx context.Context, a bashArgs, out tools.Output) (tools.Result, error) {
			if strings.TrimSpace(a.Command) == "" {
				return failf("command is required"), nil
			}
			// There is no apply_patch program: models trained on Codex
			// call it through the shell, and get the apply_patch tool.
			if patch, ok := tools.ApplyPatchCommand(a.Command); ok {
				res, err := applyPatch(ctx, root, patch)
				if err == nil {
					res.ExitCode = exitStatus(res)
				}
				return res, err
			}
			return r.run(ctx, tools.LevelFrom(ctx), a.Command, out)
		},
		withPatch: func(a bashArgs, patch string) bashArgs {
			a.Command = tools.ApplyPatchHeredoc(patch)
			return a
		},
	}
}

// exitStatus is the exit status of a call that ran no program: 0 on
// success, 1 on failure.
func exitStatus(res tools.Result) *int {
	if res.IsError {
		return new(1)
	}
	return new(0)
}

// sandboxNote tells the model what a command may do, so that it does not
// retry what the sandbox refuses.
func sandboxNote(box *sandbox.Sandbox) string {
	switch box.Kind() {
	case sandbox.KindOS:
		if box.Network() {
			return "Commands run in a sandbox: one that runs without approval can only read (the working folder and the system) and has no network; an approved one can also write the working folder (not .git/config or .git/hooks) and reach the network. Nothing outside the working folder but a private /tmp is writable."
		}
		return "Commands run in a sandbox without network: one that runs without approval can only read (the working folder and the system); an approved one can also write the working folder (not .git/config or .git/hooks). Nothing outside the working folder but a private /tmp is writable."
	case sandbox.KindNone:
		return "Every command needs the user's approval."
	}
	return ""
}

// runner runs commands through the sandbox, at the level of their call.
type runner struct {
	dir, shell string
	env        []string // for commands that run unconfined
	timeout    time.Duration
	maxOutput  int
	box        *sandbox.Sandbox
}

func (r *runner) run(ctx context.Context, level tools.Level, command string, out tools.Output) (tools.Result, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, r.timeout, errTimedOut)
	defer cancel()

	outR, outW, err := os.Pipe()
	if err != nil {
		return tools.Result{}, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return tools.Result{}, err
	}
	cmd, err := r.box.Command(ctx, level, sandbox.Request{Dir: r.dir, Argv: []string{r.shell, "-c", command}, Env: r.env})
	if err != nil {
		outR.Close()
		outW.Close()
		errR.Close()
		errW.Close()
		if errors.Is(err, sandbox.ErrUnconfined) {
			return failf("Not run: %v.", err), nil
		}
		return failf("cannot run the command: %v", err), nil
	}
	cmd.Stdout, cmd.Stderr = outW, errW // files, so Wait does not wait for the pipes
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return failf("cannot start %s: %v", r.shell, err), nil
	}

	c := &capture{out: out, max: r.maxOutput}
	var wg sync.WaitGroup
	for _, p := range []struct {
		f      *os.File
		stream string
	}{{outR, "stdout"}, {errR, "stderr"}} {
		wg.Go(func() { c.read(p.f, p.stream) })
	}
	// Whatever the shell left running goes with it: its PID namespace
	// in the sandbox, its process group outside.
	waitErr := cmd.Wait()
	drained := make(chan struct{})
	go func() { wg.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(drainGrace):
		outR.Close() // unblocks the readers
		errR.Close()
		<-drained
	}
	outR.Close()
	errR.Close()

	text := c.text()
	switch {
	case context.Cause(ctx) == errTimedOut:
		return tools.Result{Content: text + fmt.Sprintf("[timed out after %s; the command was killed]", r.timeout), IsError: true, ExitCode: new(124), TimedOut: true}, nil
	case ctx.Err() != nil:
		return tools.Result{Content: text + "[cancelled; the command was killed]", IsError: true}, nil
	}
	var exit *exec.ExitError
	var setup *sandbox.SetupError
	switch {
	case errors.As(waitErr, &setup):
		return tools.Result{Content: text + "[" + setup.Error() + "]", IsError: true}, nil
	case errors.As(waitErr, &exit):
		code := exit.ExitCode()
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return tools.Result{Content: text + fmt.Sprintf("[killed by signal %s]", ws.Signal()), IsError: true, ExitCode: new(128 + int(ws.Signal()))}, nil
		}
		return tools.Result{Content: text + fmt.Sprintf("[exit code %d]", code), IsError: true, ExitCode: new(code)}, nil
	case waitErr != nil:
		return tools.Result{Content: text + fmt.Sprintf("[%v]", waitErr), IsError: true}, nil
	}
	res := ok("%s", strings.TrimSuffix(text, "\n"))
	if text == "" {
		res = ok("(no output)")
	}
	res.ExitCode = new(0)
	return res, nil
}

var errTimedOut = errors.New("command timed out")

// capture collects a command's output in arrival order, streams it, and
// stops keeping it past max bytes (still reading, so the command never
// blocks on a full pipe).
type capture struct {
	out tools.Output
	max int

	mu      sync.Mutex
	buf     strings.Builder
	dropped int
}

func (c *capture) read(f *os.File, stream string) {
	b := make([]byte, 32<<10)
	var pending []byte // an incomplete UTF-8 sequence at the end of a read
	for {
		n, err := f.Read(b)
		if n > 0 {
			chunk := append(pending, b[:n]...)
			cut := completeUTF8(chunk)
			pending = append([]byte(nil), chunk[cut:]...)
			c.add(stream, chunk[:cut])
		}
		if err != nil {
			c.add(stream, pending)
			return
		}
	}
}

// completeUTF8 returns the length of b without a trailing incomplete rune.
func completeUTF8(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return i
			}
			break
		}
	}
	return len(b)
}

func (c *capture) add(stream string, p []byte) {
	if len(p) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	room := c.max - c.buf.Len()
	if room <= 0 {
		c.dropped += len(p)
		return
	}
	if len(p) > room {
		cut := completeUTF8(p[:room])
		c.dropped += len(p) - cut
		p = p[:cut]
	}
	text := strings.ToValidUTF8(string(p), "\uFFFD")
	c.buf.WriteString(text)
	c.out(stream, text)
}

func (c *capture) text() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.buf.String()
	if c.dropped > 0 {
		if s != "" && !strings.HasSuffix(s, "\n") {
			s += "\n"
		}
		s += fmt.Sprintf("[output truncated: %d more bytes were dropped past the %d-byte limit]\n", c.dropped, c.max)
	} else if s != "" && !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	return s
}
