package sandbox

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// fsRights are the file access rights Landlock ABI abi knows, all handled:
// an access a rule below does not grant is denied.
func fsRights(abi int) uint64 {
	switch {
	case abi >= 9:
		return 1<<17 - 1 // + resolving a Unix socket's path
	case abi >= 5:
		return 1<<16 - 1 // + ioctl on devices
	case abi >= 3:
		return 1<<15 - 1 // + truncate
	case abi == 2:
		return 1<<14 - 1 // + linking or renaming across folders
	}
	return 1<<13 - 1
}

// restrictFiles limits this thread, and the command it becomes, with
// Landlock: everything the new root shows may be read and run; only the
// private /tmp and /dev/shm, the device files and (at WorkspaceWrite) the
// working folder may be written. The mounts already make the rest
// read-only; Landlock holds even where a mount would not (a path a mount
// missed, a bug in the setup). From ABI 6 the command also cannot signal
// processes outside its sandbox or reach abstract Unix sockets made
// outside it.
func restrictFiles(sp *spec) error {
	abi, err := ll.LandlockGetABIVersion()
	if err != nil {
		return setupError("reading the Landlock ABI version", err)
	}
	handled := fsRights(abi)
	attr := ll.RulesetAttr{HandledAccessFS: handled}
	if abi >= 6 {
		attr.Scoped = ll.ScopeAbstractUnixSocket | ll.ScopeSignal
	}
	ruleset, err := ll.LandlockCreateRuleset(&attr, 0)
	if err != nil {
		return setupError("creating the Landlock ruleset", err)
	}
	defer unix.Close(ruleset)

	read := uint64(ll.AccessFSExecute | ll.AccessFSReadFile | ll.AccessFSReadDir)
	write := handled &^ uint64(ll.AccessFSMakeChar|ll.AccessFSMakeBlock|ll.AccessFSIoctlDev)
	device := handled & uint64(ll.AccessFSReadFile|ll.AccessFSWriteFile|ll.AccessFSTruncate|ll.AccessFSIoctlDev)
	rules := []struct {
		path   string
		access uint64
	}{
		{"/", read},
		{"/tmp", write},
		{"/dev/shm", write},
	}
	for _, d := range devices {
		rules = append(rules, struct {
			path   string
			access uint64
		}{"/dev/" + d, device})
	}
	if sp.Level >= WorkspaceWrite {
		rules = append(rules, struct {
			path   string
			access uint64
		}{sp.Dir, write})
	}
	for _, r := range rules {
		fd, err := unix.Open(r.path, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return setupError("opening "+r.path+" for a Landlock rule", err)
		}
		err = ll.LandlockAddPathBeneathRule(ruleset, &ll.PathBeneathAttr{AllowedAccess: r.access & handled, ParentFd: fd}, 0)
		unix.Close(fd)
		if err != nil {
			return setupError("adding the Landlock rule for "+r.path, err)
		}
	}
	// Without the TSYNC flag, this thread only: see Main.
	if err := ll.LandlockRestrictSelf(ruleset, 0); err != nil {
		return setupError("enforcing the Landlock ruleset", err)
	}
	return nil
}

// namespaceFlags are clone's flags that make namespaces.
const namespaceFlags = unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWUSER |
	unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWCGROUP

// deniedSyscalls fail with EPERM in the sandbox: debugging or reading
// other processes, mounting and namespaces (a way around the masks and
// the read-only mounts), the kernel's keyrings, BPF and perf (kernel
// attack surface), modules, kexec, reboot, swap, the clock, handles that
// bypass paths, userfaultfd and io_uring (frequent in kernel exploits).
// Names the running architecture lacks are skipped.
var deniedSyscalls = []string{
	"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd",
	"mount", "umount2", "umount", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsconfig",
	"fsmount", "fspick", "mount_setattr", "unshare", "setns",
	"keyctl", "add_key", "request_key", "bpf", "perf_event_open",
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
	"reboot", "swapon", "swapoff", "acct", "quotactl", "quotactl_fd",
	"settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "stime",
	"open_by_handle_at", "name_to_handle_at", "userfaultfd",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	"syslog", "vhangup", "lookup_dcookie", "uselib", "ustat", "sysfs", "_sysctl",
	"iopl", "ioperm", "nfsservctl", "create_module", "get_kernel_syms", "query_module",
}

// restrictSyscalls loads two seccomp filters on this thread (and so the
// command): deniedSyscalls and clone with namespace flags fail with
// EPERM, clone3 (whose flags a filter cannot read) with ENOSYS so that
// the C library falls back to clone; and a second, written by hand, that
// refuses system calls of another ABI than the native one (i386 calls on
// x86-64 would pass the first filter unchecked) and the terminal ioctls
// that push input into a terminal (TIOCSTI, TIOCLINUX).
func restrictSyscalls() error {
	info, err := arch.GetInfo("")
	if err != nil {
		return setupError("reading the architecture for seccomp", err)
	}
	var names []string
	for _, n := range deniedSyscalls {
		if _, ok := info.SyscallNames[n]; ok {
			names = append(names, n)
		}
	}
	groups := []seccomp.SyscallGroup{
		{Action: seccomp.ActionErrno, Names: names},
		{Action: seccomp.ActionErrno, NamesWithCondtions: []seccomp.NameWithConditions{{
			Name: "clone", Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.BitsSet, Value: namespaceFlags}},
		}}},
	}
	if _, ok := info.SyscallNames["clone3"]; ok {
		groups = append(groups, seccomp.SyscallGroup{Action: seccomp.Action(unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)), Names: []string{"clone3"}})
	}
	filter := seccomp.Filter{NoNewPrivs: true, Policy: seccomp.Policy{DefaultAction: seccomp.ActionAllow, Syscalls: groups}}
	if err := seccomp.LoadFilter(filter); err != nil {
		return setupError("loading the seccomp filter", err)
	}
	if err := loadGuardFilter(info); err != nil {
		return setupError("loading the seccomp ABI and ioctl filter", err)
	}
	return nil
}

// loadGuardFilter is restrictSyscalls' second filter.
func loadGuardFilter(info *arch.Info) error {
	const (
		archOffset = 4
		nrOffset   = 0
		argsOffset = 16
	)
	// The low 32 bits of ioctl's second argument: the kernel reads the
	// request as an unsigned int, whatever the upper bits say.
	arg1 := uint32(argsOffset + 8)
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		arg1 += 4 // big-endian
	}
	ioctl, ok := info.SyscallNames["ioctl"]
	if !ok {
		return fmt.Errorf("no ioctl on %s", info.Name)
	}
	deny := unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: archOffset, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(info.ID), SkipTrue: 1},
		bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)},
		bpf.LoadAbsolute{Off: nrOffset, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(ioctl) | uint32(info.SeccompMask), SkipFalse: 4},
		bpf.LoadAbsolute{Off: arg1, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.TIOCSTI, SkipTrue: 1},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.TIOCLINUX, SkipFalse: 1},
		bpf.RetConstant{Val: deny},
		bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW},
	}
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return err
	}
	filter := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		filter[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	fprog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	return unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fprog)), 0, 0)
}
