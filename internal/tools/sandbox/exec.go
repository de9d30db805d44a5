package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// ErrUnconfined is matched (errors.Is) by Command's error when a command
// would have to run confined and no sandbox is available: only an approved
// command runs without one.
var ErrUnconfined = errors.New("no sandbox is available to confine this command")

// UnavailableError says that the OS sandbox cannot be built on this machine,
// and what is missing. New returns it under ModeRequire.
type UnavailableError struct {
	Missing string
}

func (e *UnavailableError) Error() string {
	return "the OS sandbox is not available: " + e.Missing
}

// SetupError is returned by Cmd.Wait when the sandbox could not be set up
// for a command, which then never ran.
type SetupError struct {
	Reason string
}

func (e *SetupError) Error() string { return "the sandbox could not start the command: " + e.Reason }

// Config configures New.
type Config struct {
	// Mode is --sandbox: auto (default), require or off.
	Mode Mode
	// Network lets workspace-write commands reach the network
	// (--sandbox-network on). Read-only commands never do.
	Network bool
	// Dir is a folder the start-up probe may run in (the server's working
	// folder); empty is the system's temporary folder.
	Dir string
	// Missing, when set, makes New take the OS sandbox to be unavailable
	// for this reason without probing the kernel: for tests of what the
	// server does without one.
	Missing string
	Logger  *slog.Logger
}

// Sandbox starts the programs the tools run, confined at the level their
// approval chose. It is safe for concurrent use. A nil *Sandbox is one of
// KindNone.
type Sandbox struct {
	kind    Kind
	missing string // what KindNone lacks
	network bool
	abi     int      // Landlock ABI version
	masks   []string // files and folders of /etc that only root may read
	log     *slog.Logger
}

// New returns the sandbox cfg asks for. Under ModeAuto and ModeRequire it
// probes the kernel by starting one sandboxed process; when that fails,
// ModeAuto returns a sandbox of KindNone (and logs why) and ModeRequire an
// *UnavailableError.
func New(cfg Config) (*Sandbox, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mode := cfg.Mode
	if mode == "" {
		mode = ModeAuto
	}
	if mode == ModeOff {
		return &Sandbox{kind: KindOff, log: log}, nil
	}
	s := &Sandbox{kind: KindOS, network: cfg.Network, log: log}
	missing := cfg.Missing
	if missing == "" {
		missing = s.probe(cfg.Dir)
	}
	if missing != "" {
		if mode == ModeRequire {
			return nil, &UnavailableError{Missing: missing}
		}
		return &Sandbox{kind: KindNone, missing: missing, log: log}, nil
	}
	return s, nil
}

// Off is the sandbox of --sandbox off: commands run unconfined
// (danger-full-access).
func Off() *Sandbox { return &Sandbox{kind: KindOff} }

// Unavailable is a sandbox of KindNone for the given reason, as New
// returns it on a kernel that cannot sandbox.
func Unavailable(missing string) *Sandbox { return &Sandbox{kind: KindNone, missing: missing} }

// Kind says what confines the commands s starts.
func (s *Sandbox) Kind() Kind {
	if s == nil {
		return KindNone
	}
	return s.kind
}

// Missing says what the kernel lacks, for KindNone.
func (s *Sandbox) Missing() string {
	if s == nil {
		return "no sandbox was configured"
	}
	return s.missing
}

// Network reports whether workspace-write commands may reach the network.
func (s *Sandbox) Network() bool { return s != nil && s.kind == KindOS && s.network }

// Describe says in a line which sandbox is in force, for the banner.
func (s *Sandbox) Describe() string {
	switch s.Kind() {
	case KindOS:
		net := "no network"
		if s.network {
			net = "network for approved commands (--sandbox-network on)"
		}
		return fmt.Sprintf("OS sandbox (user, PID, mount, network and IPC namespaces, Landlock ABI %d, seccomp): "+
			"commands that run without approval are read-only; approved ones (and every one under full-auto) "+
			"write only the working folder; %s", s.abi, net)
	case KindOff:
		return "WARNING: no sandbox (--sandbox off, danger-full-access): a command can do whatever this server's user can, " +
			"and one that runs without approval is held by nothing but the command classifier"
	}
	return "WARNING: no OS sandbox (" + s.Missing() + "): every command asks for approval first, " +
		"and an approved command runs as this server's user (--sandbox require refuses to start instead)"
}

// Request is a program to run.
type Request struct {
	// Dir is the working folder: absolute, symbolic links resolved (as
	// Root.Dir gives it).
	Dir string
	// Argv is the program and its arguments; Argv[0] is a path, or a name
	// looked up in the sandbox's PATH.
	Argv []string
	// Env is the environment of a command that runs unconfined. A
	// sandboxed one gets Environ(Dir, ...) whatever Env says.
	Env []string
}

// Command prepares req to run at level. With an OS sandbox, level decides
// what the command may touch (FullAccess is treated as WorkspaceWrite: the
// sandbox in force sets the ceiling). With the sandbox off, every level
// runs unconfined. With none available, a command approved for
// WorkspaceWrite or more runs unconfined and a ReadOnly one is refused
// (ErrUnconfined): nothing would hold it to reading.
//
// ctx's end kills the command and everything it started: the whole PID
// namespace when sandboxed, its process group otherwise.
func (s *Sandbox) Command(ctx context.Context, level Level, req Request) (*Cmd, error) {
	if len(req.Argv) == 0 {
		return nil, errors.New("sandbox: no program to run")
	}
	switch s.Kind() {
	case KindOff:
		return plainCommand(ctx, req), nil
	case KindNone:
		if level < WorkspaceWrite {
			return nil, fmt.Errorf("%w (%s); it needs approval", ErrUnconfined, s.Missing())
		}
		return plainCommand(ctx, req), nil
	}
	return s.command(ctx, min(level, WorkspaceWrite), req)
}

// Cmd is a prepared command. Set Stdout and Stderr on it, then Start and
// Wait.
type Cmd struct {
	*exec.Cmd
	sandboxed bool
	// spec (the launcher's instructions) and errW (where it reports a
	// failed setup) are the child's ends, closed once it started; errR
	// is read after Wait.
	spec, errR, errW *os.File
}

func plainCommand(ctx context.Context, req Request) *Cmd {
	cmd := exec.CommandContext(ctx, req.Argv[0], req.Argv[1:]...)
	cmd.Dir, cmd.Env = req.Dir, req.Env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return killGroup(cmd.Process.Pid) }
	return &Cmd{Cmd: cmd}
}

// Start starts the command.
func (c *Cmd) Start() error {
	err := c.Cmd.Start()
	if c.spec != nil {
		c.spec.Close()
		c.errW.Close()
	}
	if err != nil && c.errR != nil {
		c.errR.Close()
	}
	return err
}

// Wait waits for the command to end. A sandboxed command's PID namespace
// ends with it, taking every process it left behind; an unconfined
// command's process group is killed. Wait returns a *SetupError when the
// sandbox could not be set up, else what exec.Cmd.Wait returns.
func (c *Cmd) Wait() error {
	err := c.Cmd.Wait()
	if !c.sandboxed {
		_ = killGroup(c.Process.Pid)
		return err
	}
	// The launcher's end of the pipe closed when it exec'ed the command
	// or exited, so this read cannot block.
	b := make([]byte, 4096)
	n, _ := c.errR.Read(b)
	c.errR.Close()
	if n > 0 {
		return &SetupError{Reason: strings.TrimSpace(string(b[:n]))}
	}
	return err
}

func killGroup(pid int) error {
	err := syscall.Kill(-pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}
