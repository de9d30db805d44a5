// Package sandboxtest helps tests judge the sandbox by its effects: a
// marker secret in the test process's own initial environment, snapshots
// of the folders a command must not change, and a listener that counts
// the connections a command must not make.
package sandboxtest

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/agentwire/agentwire/internal/tools/sandbox"
)

// SecretVar is the variable that carries the marker secret.
const SecretVar = "AGENTWIRE_TEST_MARKER_SECRET"

// ReexecWithSecret makes the test process carry a marker secret in its
// initial environment, where /proc/PID/environ shows it (os.Setenv and
// t.Setenv change only the process's copy): when the variable is not
// set, it re-executes the test binary with it, the same arguments and
// every other variable. Call it from TestMain, after sandbox.Main.
func ReexecWithSecret() {
	if os.Getenv(SecretVar) != "" {
		return
	}
	b := make([]byte, 12)
	rand.Read(b)
	env := append(os.Environ(), SecretVar+"=aw-marker-"+hex.EncodeToString(b))
	err := syscall.Exec("/proc/self/exe", os.Args, env)
	fmt.Fprintln(os.Stderr, "sandboxtest: cannot re-execute the test binary with a marker secret:", err)
	os.Exit(2)
}

// Secret is the marker secret of the process's initial environment, ""
// when ReexecWithSecret was not called.
func Secret() string { return os.Getenv(SecretVar) }

// New returns an OS sandbox configured by cfg, or skips t, saying what the
// machine lacks.
func New(t testing.TB, cfg sandbox.Config) *sandbox.Sandbox {
	t.Helper()
	s, err := sandbox.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if s.Kind() != sandbox.KindOS {
		t.Skipf("the OS sandbox is not available here: %s", s.Missing())
	}
	return s
}

// Tree is what a folder holds: for each path under it, its type,
// permissions and content digest (or link target).
type Tree map[string]string

// Snapshot reads dir's tree.
func Snapshot(t testing.TB, dir string) Tree {
	t.Helper()
	tree := Tree{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		desc := fi.Mode().String()
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			desc += " -> " + target
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			desc += " " + hex.EncodeToString(sum[:8])
		}
		tree[rel] = desc
		return nil
	})
	if err != nil {
		t.Fatalf("snapshot %s: %v", dir, err)
	}
	return tree
}

// Changes lists what differs between two snapshots of a folder.
func Changes(before, after Tree) []string {
	var out []string
	for p, a := range after {
		if b, ok := before[p]; !ok {
			out = append(out, "created "+p+" ("+a+")")
		} else if a != b {
			out = append(out, "changed "+p+" ("+b+" => "+a+")")
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			out = append(out, "removed "+p)
		}
	}
	slices.Sort(out)
	return out
}

// Listener accepts TCP connections on 127.0.0.1 and counts them; a
// sandboxed command without network must never reach it.
type Listener struct {
	ln       net.Listener
	accepted atomic.Int32
	wg       sync.WaitGroup
}

// Listen opens a Listener that closes at t's cleanup.
func Listen(t testing.TB) *Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &Listener{ln: ln}
	l.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if err != nil {
				continue
			}
			l.accepted.Add(1)
			_, _ = c.Write([]byte("reached\n"))
			c.Close()
		}
	})
	t.Cleanup(func() {
		ln.Close()
		l.wg.Wait()
	})
	return l
}

// Addr is the listener's host:port.
func (l *Listener) Addr() string { return l.ln.Addr().String() }

// Port is the listener's port.
func (l *Listener) Port() int { return l.ln.Addr().(*net.TCPAddr).Port }

// Accepted is how many connections reached the listener.
func (l *Listener) Accepted() int { return int(l.accepted.Load()) }
