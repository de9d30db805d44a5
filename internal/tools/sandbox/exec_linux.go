package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// launcherArg is argv[1] of the server binary re-executed as the sandbox's
// launcher (see Main). No flag or command of the server looks like it.
const launcherArg = "__agentwire_sandbox_launcher__"

// spec is what the server tells the launcher, as JSON on file descriptor 3.
type spec struct {
	// Probe sets everything up and exits 0 instead of running Argv.
	Probe   bool     `json:"probe,omitempty"`
	Level   Level    `json:"level"`
	Network bool     `json:"network,omitempty"`
	Dir     string   `json:"dir"`
	Argv    []string `json:"argv,omitempty"`
	Env     []string `json:"env,omitempty"`
	// Masks are paths under /etc that only root (or a group) may read:
	// the launcher hides them, since the command may well run as root.
	Masks []string `json:"masks,omitempty"`
}

// Launcher's file descriptors: the spec, and a pipe for a setup failure
// (close-on-exec in the launcher, so it closes when the command starts).
const (
	specFD = 3
	errFD  = 4
)

// command starts req through the launcher at level.
func (s *Sandbox) command(ctx context.Context, level Level, req Request) (*Cmd, error) {
	if err := checkDir(req.Dir); err != nil {
		return nil, err
	}
	sp := spec{Level: level, Network: s.network && level >= WorkspaceWrite, Dir: req.Dir,
		Argv: req.Argv, Env: Environ(req.Dir, os.Getenv("LANG")), Masks: s.masks}
	return s.launch(ctx, sp)
}

// checkDir refuses working folders the sandbox cannot confine a command
// to: one must be an absolute folder other than / and the kernel's own
// file systems.
func checkDir(dir string) error {
	switch {
	case !filepath.IsAbs(dir) || filepath.Clean(dir) != dir:
		return fmt.Errorf("sandbox: the working folder %q is not an absolute, clean path", dir)
	case dir == "/":
		return errors.New("sandbox: cannot confine a command to a working folder of / (the whole file system)")
	}
	for _, kernel := range []string{"/proc", "/sys", "/dev"} {
		if dir == kernel || strings.HasPrefix(dir, kernel+"/") {
			return fmt.Errorf("sandbox: cannot use %s as a working folder", dir)
		}
	}
	return nil
}

func (s *Sandbox) launch(ctx context.Context, sp spec) (*Cmd, error) {
	b, err := json.Marshal(sp)
	if err != nil {
		return nil, err
	}
	fd, err := unix.MemfdCreate("agentwire-sandbox-spec", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	specFile := os.NewFile(uintptr(fd), "sandbox-spec")
	if _, err := specFile.Write(b); err != nil {
		specFile.Close()
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		specFile.Close()
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	uid, gid := os.Getuid(), os.Getgid()
	cmd := exec.CommandContext(ctx, "/proc/self/exe")
	cmd.Args = []string{"agentwire-sandbox", launcherArg}
	cmd.Env = []string{} // the launcher needs nothing of the server's
	cmd.Dir = sp.Dir
	cmd.ExtraFiles = []*os.File{specFile, errW}
	flags := uintptr(unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS)
	if !sp.Network {
		flags |= unix.CLONE_NEWNET
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: flags,
		// The same ids inside as outside: files the command makes are
		// the server user's. Root stays root (uid 0), which is why the
		// launcher drops every capability and hides root's files.
		UidMappings: []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}},
		// The launcher needs these in its namespaces to build them; a
		// user other than root would lose them at execve but for the
		// ambient set. It drops them, and every other, before the command.
		AmbientCaps: []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_SETPCAP, unix.CAP_NET_ADMIN},
		Setpgid:     true,
		Pdeathsig:   syscall.SIGKILL, // the server gone, its commands go too
	}
	// The command is PID 1 of its namespace: killing it makes the kernel
	// kill every process in the namespace.
	cmd.Cancel = func() error { return cmd.Process.Kill() }
	return &Cmd{Cmd: cmd, sandboxed: true, spec: specFile, errR: errR, errW: errW}, nil
}

// probe starts one sandboxed process that sets everything up, in dir (or
// the temporary folder), and says what is missing when it fails, or ""
// when it works. It also reads what the sandbox needs to know of the
// machine: the Landlock ABI and the files of /etc to hide.
func (s *Sandbox) probe(dir string) string {
	abi, err := ll.LandlockGetABIVersion()
	if err != nil || abi < 1 {
		return fmt.Sprintf("Landlock (the kernel lacks it, or it is not among the enabled LSMs: %v)", err)
	}
	s.abi = abi
	if _, err := os.Stat("/proc/self/ns/user"); err != nil {
		return "user namespaces (the kernel was built without them)"
	}
	s.masks = rootOnly("/etc")
	if dir == "" {
		dir = os.TempDir()
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	if checkDir(dir) != nil {
		dir = os.TempDir()
	}
	cmd, err := s.launch(context.Background(), spec{Probe: true, Level: WorkspaceWrite, Dir: dir, Masks: s.masks})
	if err != nil {
		return err.Error()
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		switch {
		case errors.Is(err, syscall.EPERM), errors.Is(err, syscall.EACCES):
			return fmt.Sprintf("unprivileged user namespaces (creating one was refused: %v; see the kernel.unprivileged_userns_clone "+
				"and user.max_user_namespaces sysctls, or an AppArmor or container policy)", err)
		case errors.Is(err, syscall.ENOSPC):
			return "user namespaces (user.max_user_namespaces is 0)"
		}
		return fmt.Sprintf("namespaces (starting a sandboxed process failed: %v)", err)
	}
	if err := cmd.Wait(); err != nil {
		var setup *SetupError
		if errors.As(err, &setup) {
			return setup.Reason
		}
		return fmt.Sprintf("the sandbox's launcher (%v; %s): is sandbox.Main reachable from this binary's main?", err, strings.TrimSpace(stderr.String()))
	}
	return ""
}

// rootOnly returns the files and folders under dir that other users may
// not read (a file without the other-read bit, a folder without
// other-read or other-search): shadow, gshadow, private keys, a
// database's pg_hba.conf. A folder listed is not descended into.
func rootOnly(dir string) []string {
	var masks []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if p == dir || d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		mode := fi.Mode().Perm()
		switch {
		case d.IsDir() && mode&0o005 != 0o005:
			masks = append(masks, p)
			return fs.SkipDir
		case fi.Mode().IsRegular() && mode&0o004 == 0:
			masks = append(masks, p)
		}
		return nil
	})
	return masks
}
