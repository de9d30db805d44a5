package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// child is a server process the loadgen started: agentwire or the relay.
// stop ends it and waits for it; every path that starts one stops it.
type child struct {
	name   string
	cmd    *exec.Cmd
	addr   string // host:port it serves on, from its first lines
	out    *tailBuffer
	wg     sync.WaitGroup // the stdout reader, which also waits for the process
	exited chan struct{}
	err    error // from Wait; read after exited is closed
}

// startChild starts argv and waits until a line of its stdout matches
// addrRE, whose first group is the address it serves on.
func startChild(ctx context.Context, name string, argv, env []string, dir string, addrRE *regexp.Regexp) (*child, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Dir = dir
	cmd.SysProcAttr = sysProcAttr()
	out := &tailBuffer{max: 64 << 10}
	cmd.Stderr = out
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, out: out, exited: make(chan struct{})}
	addrCh := make(chan string, 1)
	c.wg.Go(func() {
		sc := bufio.NewScanner(stdout)
		found := false
		for sc.Scan() {
			line := sc.Text()
			_, _ = out.Write([]byte(line + "\n"))
			if m := addrRE.FindStringSubmatch(line); m != nil && !found {
				found = true
				addrCh <- m[1]
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		c.err = cmd.Wait()
		close(c.exited)
	})
	t := time.NewTimer(2 * time.Minute)
	defer t.Stop()
	select {
	case c.addr = <-addrCh:
		return c, nil
	case <-c.exited:
		c.wg.Wait()
		return nil, fmt.Errorf("%s exited before serving (%v):\n%s", name, c.err, out.String())
	case <-ctx.Done():
		c.stop()
		return nil, ctx.Err()
	case <-t.C:
		c.stop()
		return nil, fmt.Errorf("%s did not say where it serves within 2m:\n%s", name, out.String())
	}
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// stop asks the process to end (SIGTERM), kills it if it has not within
// 15 s, and waits for it.
func (c *child) stop() {
	select {
	case <-c.exited:
	default:
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		t := time.NewTimer(15 * time.Second)
		select {
		case <-c.exited:
		case <-t.C:
			_ = c.cmd.Process.Kill()
			<-c.exited
		}
		t.Stop()
	}
	c.wg.Wait()
}

// running reports an error when the process has exited.
func (c *child) running() error {
	select {
	case <-c.exited:
		return fmt.Errorf("%s exited (%v):\n%s", c.name, c.err, c.out.String())
	default:
		return nil
	}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// procStats is what /proc says of a process at one moment.
type procStats struct {
	cpu        time.Duration // user + system time of all its threads
	rss        int64         // resident set, bytes
	writeBytes int64         // bytes it caused to be written to storage
}

func (a procStats) sub(b procStats) procStats {
	return procStats{cpu: a.cpu - b.cpu, rss: a.rss - b.rss, writeBytes: a.writeBytes - b.writeBytes}
}

// readProcStats reads pid's CPU time, RSS and storage writes.
func readProcStats(pid int) (procStats, error) {
	var s procStats
	var err error
	if s.cpu, err = cpuTime(pid); err != nil {
		return s, err
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	kb, err := procField(string(status), "VmRSS:")
	if err != nil {
		return s, err
	}
	s.rss = kb * 1024
	io, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return s, err
	}
	if s.writeBytes, err = procField(string(io), "write_bytes:"); err != nil {
		return s, err
	}
	return s, nil
}

// cpuTime is the time pid's threads have run, in nanoseconds from each
// thread's schedstat (clock ticks of /proc/PID/stat are 10 ms, too coarse
// for short runs); without schedstat, utime+stime from stat.
func cpuTime(pid int) (time.Duration, error) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return 0, err
	}
	var total time.Duration
	n := 0
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
		if err != nil {
			continue // the thread ended, or no schedstat
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			continue
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			continue
		}
		total += time.Duration(ns)
		n++
	}
	if n > 0 {
		return total, nil
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, errors.New("short /proc/PID/stat")
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(ut+st) * 10 * time.Millisecond, nil // USER_HZ is 100 on Linux
}

// procField is the number after name in a /proc key-value file.
func procField(text, name string) (int64, error) {
	for line := range strings.SplitSeq(text, "\n") {
		if rest, ok := strings.CutPrefix(line, name); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				break
			}
			return strconv.ParseInt(f[0], 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc", name)
}

// dirSize is the total size of the regular files under dir.
func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		if info, err := d.Info(); err == nil {
			n += info.Size()
		}
		return nil
	})
	return n
}
