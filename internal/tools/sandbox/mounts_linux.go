package sandbox

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// newRoot is where the launcher builds the command's root file system
// before it pivots into it: a tmpfs mounted over /tmp, in the sandbox's
// mount namespace only.
const newRoot = "/tmp"

// systemDirs are shown to every command, read-only: programs, libraries
// and configuration. A symbolic link among them (/bin -> usr/bin) is
// copied as a link.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"}

// devices are the device files of the sandbox's /dev.
var devices = []string{"null", "zero", "full", "random", "urandom"}

// procReadOnly are parts of /proc a command may not write, even as uid 0
// (sysctl writes check the uid, not capabilities).
var procReadOnly = []string{"sys", "sysrq-trigger", "irq", "bus"}

// buildRoot gives the launcher's mount namespace a root of its own and
// pivots into it:
//
//	/usr /bin /sbin /lib* /etc   the machine's, read-only; under /etc, what
//	                             only root may read is hidden (spec.Masks)
//	/dev                         null, zero, full, random, urandom; fd,
//	                             stdin, stdout, stderr; a private /dev/shm
//	/proc                        the sandbox's own PID namespace; /proc/sys
//	                             read-only
//	/tmp                         a private tmpfs
//	the working folder           at its own path: read-only, or read-write
//	                             with .git/config and .git/hooks read-only
//
// and nothing else: no home folders, no /run, no /var, no server data.
func buildRoot(sp *spec) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return setupError("making the mounts private", err)
	}
	// The working folder may be under /tmp, which the new root is about
	// to cover: hold it open and bind it through its descriptor.
	wd, err := unix.Open(sp.Dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return setupError("opening the working folder "+sp.Dir, err)
	}
	defer unix.Close(wd)
	if err := unix.Mount("tmpfs", newRoot, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755"); err != nil {
		return setupError("mounting the sandbox's root", err)
	}
	if err := systemMounts(sp.Masks); err != nil {
		return err
	}
	if err := devMounts(); err != nil {
		return err
	}
	if err := procMount(); err != nil {
		return err
	}
	if err := os.Mkdir(newRoot+"/tmp", 0o1777); err != nil {
		return setupError("making /tmp", err)
	}
	if err := unix.Mount("tmpfs", newRoot+"/tmp", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777"); err != nil {
		return setupError("mounting a private /tmp", err)
	}
	if err := workdirMount(fmt.Sprintf("/proc/self/fd/%d", wd), sp); err != nil {
		return err
	}
	if sp.Network {
		if err := resolverMount(); err != nil {
			return err
		}
	}
	if err := setAttr(newRoot, false, unix.MOUNT_ATTR_RDONLY); err != nil {
		return setupError("making the sandbox's root read-only", err)
	}
	return pivot(sp.Dir)
}

func bind(src, dst string, recursive bool) error {
	flags := uintptr(unix.MS_BIND)
	if recursive {
		flags |= unix.MS_REC
	}
	if err := unix.Mount(src, dst, "", flags, ""); err != nil {
		return setupError("binding "+src+" to "+dst, err)
	}
	return nil
}

// setAttr sets mount attributes on the mount at path (and every mount
// under it when recursive).
func setAttr(path string, recursive bool, attrs uint64) error {
	flags := uint(0)
	if recursive {
		flags = unix.AT_RECURSIVE
	}
	return unix.MountSetattr(unix.AT_FDCWD, path, flags, &unix.MountAttr{Attr_set: attrs})
}

func systemMounts(masks []string) error {
	var bound []string
	for _, d := range systemDirs {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
			continue
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(d)
			if err != nil {
				return setupError("reading the link "+d, err)
			}
			if err := os.Symlink(target, newRoot+d); err != nil {
				return setupError("linking "+d, err)
			}
		case fi.IsDir():
			if err := os.Mkdir(newRoot+d, 0o755); err != nil {
				return setupError("making "+d, err)
			}
			if err := bind(d, newRoot+d, true); err != nil {
				return err
			}
			bound = append(bound, newRoot+d)
		}
	}
	// A file only root can read is covered by an empty one nobody can
	// read; such a folder by an empty read-only tmpfs nobody can enter.
	mask := newRoot + "/.mask"
	if err := os.WriteFile(mask, nil, 0); err != nil {
		return setupError("making the mask file", err)
	}
	for _, m := range masks {
		target := newRoot + m
		fi, err := os.Lstat(target)
		switch {
		case err != nil:
			continue
		case fi.IsDir():
			if err := unix.Mount("tmpfs", target, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=000,size=4k"); err != nil {
				return setupError("hiding "+m, err)
			}
		case fi.Mode().IsRegular():
			if err := bind(mask, target, false); err != nil {
				return err
			}
		}
	}
	if err := os.Remove(mask); err != nil {
		return setupError("removing the mask file", err)
	}
	for _, d := range bound {
		if err := setAttr(d, true, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV); err != nil {
			return setupError("making "+strings.TrimPrefix(d, newRoot)+" read-only", err)
		}
	}
	return nil
}

func devMounts() error {
	dev := newRoot + "/dev"
	if err := os.Mkdir(dev, 0o755); err != nil {
		return setupError("making /dev", err)
	}
	if err := unix.Mount("tmpfs", dev, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755"); err != nil {
		return setupError("mounting /dev", err)
	}
	for _, d := range devices {
		if err := os.WriteFile(dev+"/"+d, nil, 0o666); err != nil {
			return setupError("making /dev/"+d, err)
		}
		if err := bind("/dev/"+d, dev+"/"+d, false); err != nil {
			return err
		}
	}
	for name, target := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0",
		"stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		if err := os.Symlink(target, dev+"/"+name); err != nil {
			return setupError("linking /dev/"+name, err)
		}
	}
	if err := os.Mkdir(dev+"/shm", 0o1777); err != nil {
		return setupError("making /dev/shm", err)
	}
	if err := unix.Mount("tmpfs", dev+"/shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777"); err != nil {
		return setupError("mounting /dev/shm", err)
	}
	if err := setAttr(dev, false, unix.MOUNT_ATTR_RDONLY); err != nil {
		return setupError("making /dev read-only", err)
	}
	return nil
}

func procMount() error {
	proc := newRoot + "/proc"
	if err := os.Mkdir(proc, 0o555); err != nil {
		return setupError("making /proc", err)
	}
	if err := unix.Mount("proc", proc, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return setupError("mounting a /proc of the sandbox's PID namespace (refused where the machine's /proc has "+
			"parts hidden, as in some containers)", err)
	}
	for _, p := range procReadOnly {
		target := proc + "/" + p
		if _, err := os.Lstat(target); err != nil {
			continue
		}
		if err := bind(target, target, true); err != nil {
			return err
		}
		if err := setAttr(target, true, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC); err != nil {
			return setupError("making /proc/"+p+" read-only", err)
		}
	}
	return nil
}

// workdirMount binds the working folder (src, its descriptor's path) at
// its own path: read-only at ReadOnly; at WorkspaceWrite writable, but for
// the git settings and hooks that would run programs the next time
// someone uses git there (gitProtected).
func workdirMount(src string, sp *spec) error {
	target := newRoot + sp.Dir
	if err := os.MkdirAll(target, 0o755); err != nil {
		return setupError("making the working folder's mount point", err)
	}
	if err := bind(src, target, true); err != nil {
		return err
	}
	attrs := uint64(unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV)
	if sp.Level < WorkspaceWrite {
		attrs |= unix.MOUNT_ATTR_RDONLY
	}
	if err := setAttr(target, true, attrs); err != nil {
		return setupError("setting the working folder's mount", err)
	}
	if sp.Level < WorkspaceWrite {
		return nil
	}
	git := filepath.Join(target, ".git")
	if fi, err := os.Lstat(git); err != nil || !fi.IsDir() {
		return nil
	}
	// A mount point cannot be renamed or removed: .git stays where it
	// is, so the protected files cannot be swapped for a new .git.
	if err := bind(git, git, true); err != nil {
		return err
	}
	for _, p := range gitProtected(git, 0) {
		if err := bind(p, p, true); err != nil {
			return err
		}
		if err := setAttr(p, true, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV); err != nil {
			return setupError("making "+strings.TrimPrefix(p, target+"/")+" read-only", err)
		}
	}
	return nil
}

// gitProtected returns the existing files and folders of the git folder
// dir that a sandboxed command may not write: its config, worktree config
// and hooks, and those of its worktrees and submodules.
func gitProtected(dir string, depth int) []string {
	if depth > 8 {
		return nil
	}
	var out []string
	for _, name := range []string{"config", "config.worktree", "hooks"} {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			out = append(out, filepath.Join(dir, name))
		}
	}
	if trees, err := os.ReadDir(filepath.Join(dir, "worktrees")); err == nil {
		for _, t := range trees {
			p := filepath.Join(dir, "worktrees", t.Name(), "config.worktree")
			if _, err := os.Lstat(p); err == nil {
				out = append(out, p)
			}
		}
	}
	_ = filepath.WalkDir(filepath.Join(dir, "modules"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if _, err := os.Lstat(filepath.Join(p, "HEAD")); err == nil {
			out = append(out, gitProtected(p, depth+1)...)
			return fs.SkipDir
		}
		return nil
	})
	return out
}

// resolverMount shows /etc/resolv.conf's target, when it is a link out of
// the system directories (to /run/systemd/resolve, say), so that a command
// granted the network can look names up.
func resolverMount() error {
	target, err := filepath.EvalSymlinks("/etc/resolv.conf")
	if err != nil {
		return nil
	}
	for _, d := range systemDirs {
		if strings.HasPrefix(target, d+"/") {
			return nil
		}
	}
	dst := newRoot + target
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return setupError("making "+filepath.Dir(target), err)
	}
	if err := os.WriteFile(dst, nil, 0o644); err != nil {
		return setupError("making "+target, err)
	}
	if err := bind(target, dst, false); err != nil {
		return err
	}
	return setAttr(dst, false, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
}

// pivot makes the new root the root, drops the old one, and enters dir.
func pivot(dir string) error {
	if err := unix.Chdir(newRoot); err != nil {
		return setupError("entering the sandbox's root", err)
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return setupError("pivoting into the sandbox's root", err)
	}
	// The old root now sits on top of the new one: detach it.
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return setupError("detaching the machine's root", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return setupError("entering /", err)
	}
	if err := unix.Chdir(dir); err != nil {
		return setupError("entering the working folder", err)
	}
	return nil
}
