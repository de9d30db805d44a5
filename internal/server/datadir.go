package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// lockFileName is the file in the data directory that one server holds an
// exclusive lock on for as long as it runs.
const lockFileName = "agentwire.lock"

// dataDirLock is a server's hold on its SQLite data directory. SQLite is
// one server's store: two servers on one directory would both take runs of
// the same threads and interleave them. (Servers share threads through
// PostgreSQL and NATS instead.)
type dataDirLock struct{ f *os.File }

// errDataDirLocked is the error of a second server on a locked directory.
var errDataDirLocked = errors.New("the data directory is in use by another agentwire server")

// lockDataDir takes the exclusive lock on dir, creating dir if needed, and
// records who holds it. A directory another process holds fails at once,
// naming the holder.
func lockDataDir(dir, node string) (*dataDirLock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			who := strings.TrimSpace(string(holder))
			if who == "" {
				who = "an unknown process"
			}
			return nil, fmt.Errorf("%w (%s): %s; stop it, or give this one another --data-dir", errDataDirLocked, dir, who)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	host, _ := os.Hostname()
	who := fmt.Sprintf("held by pid %d on %s (node %s) since %s\n", os.Getpid(), host, node, time.Now().UTC().Format(time.RFC3339))
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(who), 0)
	}
	return &dataDirLock{f: f}, nil
}

// release lets the directory go. The lock also goes with the process.
func (l *dataDirLock) release() error {
	if l == nil || l.f == nil {
		return nil
	}
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	err := l.f.Close()
	l.f = nil
	return err
}
