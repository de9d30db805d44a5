package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Main runs the sandbox's launcher when this process is one, and returns at
// once when it is not. The server starts a sandboxed command by
// re-executing its own binary (/proc/self/exe) with launcherArg as
// argv[1], in new user, PID, mount, IPC, UTS and (unless the network is
// granted) network namespaces. The launcher builds the command's file
// system, drops every capability, restricts itself with Landlock and
// seccomp, and replaces itself with the command (execve), which so
// becomes PID 1 of the namespace: when it ends, the kernel kills whatever
// it left running.
//
// Landlock, seccomp and the capability calls restrict the calling thread
// only (the server links cgo, so Go cannot apply them to every thread),
// and they must never touch the server: so they are made here, in the
// child, on the thread the runtime locked for init, and execve follows
// at once. execve keeps that thread's restrictions and ends every other
// thread.
//
// Main is called by the package's init, so every binary that links this
// package can serve as its own launcher, test binaries included (tests
// re-execute the test binary). cmd/server's main calls it first thing all
// the same, to say so where the binary starts.
func Main() {
	if len(os.Args) < 2 || os.Args[1] != launcherArg {
		return
	}
	runtime.LockOSThread()
	err := launch()
	// launch returns only when setting up failed, or after a probe. The
	// launcher exits at once, without the runtime's exit hooks: in a
	// binary built with -race they would sleep a second.
	if err == nil {
		syscall.Exit(0)
	}
	errPipe := os.NewFile(errFD, "sandbox-errors")
	if _, werr := io.WriteString(errPipe, err.Error()); werr != nil {
		fmt.Fprintln(os.Stderr, "agentwire sandbox:", err)
	}
	syscall.Exit(125)
}

// setupError names the step of the setup that failed.
func setupError(step string, err error) error {
	return fmt.Errorf("%s: %w", step, err)
}

func launch() error {
	if err := inFreshNamespaces(); err != nil {
		return err
	}
	unix.CloseOnExec(errFD)
	sp, err := readSpec()
	if err != nil {
		return err
	}
	if err := buildRoot(&sp); err != nil {
		return err
	}
	if !sp.Network {
		if err := loopbackUp(); err != nil {
			return setupError("bringing up the loopback interface of the sandbox's network namespace", err)
		}
	}
	setLimits()
	if err := dropCapabilities(); err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return setupError("setting no_new_privs", err)
	}
	if err := restrictFiles(&sp); err != nil {
		return err
	}
	if err := restrictSyscalls(); err != nil {
		return err
	}
	if sp.Probe {
		return nil
	}
	path, err := lookPath(sp.Argv[0])
	if err != nil {
		return err
	}
	return setupError("starting "+sp.Argv[0], syscall.Exec(path, sp.Argv, sp.Env))
}

// inFreshNamespaces refuses to set anything up unless this process is
// PID 1 of a new PID namespace inside a user namespace of its own: run by
// hand in the machine's namespaces, the mounts below would be the
// machine's.
func inFreshNamespaces() error {
	if os.Getpid() != 1 {
		return errors.New("the launcher runs only as PID 1 of a namespace the server made for it")
	}
	m, err := os.ReadFile("/proc/self/uid_map")
	if err != nil {
		return setupError("reading the user namespace's id map", err)
	}
	if f := strings.Fields(string(m)); len(f) != 3 || f[2] == "4294967295" {
		return errors.New("the launcher runs only in a user namespace the server made for it")
	}
	return nil
}

func readSpec() (spec, error) {
	f := os.NewFile(specFD, "sandbox-spec")
	defer f.Close()
	b, err := io.ReadAll(io.NewSectionReader(f, 0, 64<<20))
	if err != nil {
		return spec{}, setupError("reading the launch spec", err)
	}
	var sp spec
	if err := json.Unmarshal(b, &sp); err != nil {
		return spec{}, setupError("reading the launch spec", err)
	}
	if !sp.Probe && len(sp.Argv) == 0 {
		return spec{}, errors.New("the launch spec names no program")
	}
	return sp, nil
}

// lookPath finds prog in the sandbox's PATH, unless it names a path.
func lookPath(prog string) (string, error) {
	if strings.ContainsRune(prog, '/') {
		return prog, nil
	}
	for _, dir := range filepath.SplitList(defaultPath) {
		p := filepath.Join(dir, prog)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: not found in the sandbox's PATH (%s)", prog, defaultPath)
}

// loopbackUp brings up lo in the sandbox's own network namespace, so that
// a command may serve and reach itself on 127.0.0.1; nothing else is there.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// Resource limits of a sandboxed command, lowered only (an existing lower
// limit stays).
var limits = []struct {
	resource int
	max      uint64
}{
	{unix.RLIMIT_CORE, 0},        // no core files of its programs in the working folder
	{unix.RLIMIT_FSIZE, 4 << 30}, // no file over 4 GiB
	{unix.RLIMIT_NOFILE, 8192},   // file descriptors per process
}

func setLimits() {
	for _, l := range limits {
		var cur unix.Rlimit
		if unix.Getrlimit(l.resource, &cur) != nil {
			continue
		}
		cur.Cur, cur.Max = min(cur.Cur, l.max), min(cur.Max, l.max)
		_ = unix.Setrlimit(l.resource, &cur)
	}
}

// Secure bits (linux/securebits.h), each with its lock.
const (
	secbitNoroot                  = 1 << 0
	secbitNorootLocked            = 1 << 1
	secbitNoSetuidFixup           = 1 << 2
	secbitNoSetuidFixupLocked     = 1 << 3
	secbitKeepCapsLocked          = 1 << 5
	secbitNoCapAmbientRaise       = 1 << 6
	secbitNoCapAmbientRaiseLocked = 1 << 7
)

// dropCapabilities leaves this thread, and the command it becomes, no
// capability in any set, and no way back: the bounding and ambient sets
// are emptied, and the secure bits, locked, stop uid 0 from regaining
// capabilities at execve. The command may run as uid 0 (the server's
// root, mapped); without capabilities that is only the owner of root's
// files, which the mounts keep read-only or hidden.
func dropCapabilities() error {
	bits := secbitNoroot | secbitNorootLocked | secbitNoSetuidFixup | secbitNoSetuidFixupLocked |
		secbitKeepCapsLocked | secbitNoCapAmbientRaise | secbitNoCapAmbientRaiseLocked
	if err := unix.Prctl(unix.PR_SET_SECUREBITS, uintptr(bits), 0, 0, 0); err != nil {
		return setupError("locking the secure bits", err)
	}
	for c := 0; ; c++ {
		err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0)
		if errors.Is(err, unix.EINVAL) {
			break // past the last capability
		}
		if err != nil {
			return setupError(fmt.Sprintf("dropping capability %d from the bounding set", c), err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return setupError("clearing the ambient capabilities", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return setupError("dropping the capabilities", err)
	}
	return nil
}
