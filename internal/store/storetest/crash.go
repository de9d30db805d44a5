package storetest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/store"
)

// crashEnv turns a test binary into a crash child; its value is the target
// the child opens.
const crashEnv = "AGENTWIRE_STORETEST_CRASH_TARGET"

// Opener opens the store named by target (a directory, a schema, whatever
// the backend's test chose) in the crash child and in the checking parent.
type Opener func(ctx context.Context, target string) (store.Log, error)

const (
	crashThreads = 4
	crashWorkers = 6
	// crashLifetime ends a child whose parent is gone.
	crashLifetime = time.Minute
)

// CrashChild makes the test binary a crash child when Crash started it, and
// then never returns; otherwise it returns at once. Call it first in the
// TestMain of a package that calls Crash.
func CrashChild(open Opener) {
	target, ok := os.LookupEnv(crashEnv)
	if !ok {
		return
	}
	if err := runCrashChild(open, target); err != nil {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		os.Exit(3)
	}
	os.Exit(0)
}

// runCrashChild appends batches of 1 to 4 events from several goroutines to
// a few threads and, after each Append returns, prints "ack <thread>
// <seq>:<id>...". It runs until killed.
func runCrashChild(open Opener, target string) error {
	ctx, cancel := context.WithTimeout(context.Background(), crashLifetime)
	defer cancel()
	l, err := open(ctx, target)
	if err != nil {
		return err
	}
	defer l.Close()
	var mu sync.Mutex
	say := func(line string) error {
		mu.Lock()
		defer mu.Unlock()
		_, err := io.WriteString(os.Stdout, line+"\n") // one write: a line is never torn
		return err
	}
	if err := say("ready"); err != nil {
		return err
	}
	errs := make(chan error, crashWorkers)
	var wg sync.WaitGroup
	for w := range crashWorkers {
		wg.Go(func() {
			for ctx.Err() == nil {
				n := 1 + rand.IntN(4)
				batch := event.NewID()
				in := make([]event.Event, n)
				for k := range in {
					in[k] = event.Event{Run: batch, Payload: event.MessageDelta{MessageID: batch, Text: fmt.Sprintf("%d/%d", k+1, n)}}
				}
				thread := fmt.Sprintf("crash-%d", (w+rand.IntN(2))%crashThreads)
				got, err := l.Append(ctx, thread, in...)
				if err != nil {
					if ctx.Err() == nil {
						errs <- err
					}
					return
				}
				var b strings.Builder
				fmt.Fprintf(&b, "ack %s", thread)
				for _, e := range got {
					fmt.Fprintf(&b, " %d:%s", e.Seq, e.ID)
				}
				if err := say(b.String()); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return errors.Join(<-errs)
}

// ack is one event the child reported committed.
type ack struct {
	thread string
	seq    int64
	id     string
}

// Crash is the durability test. kills times it starts this test binary as a
// child (which must call CrashChild in TestMain) that appends to target and
// acknowledges each append on stdout, kills it with SIGKILL at a random
// moment, then reopens the store and checks that every acknowledged event is
// there at its seq, that every thread is gapless, and that no append was
// committed in part.
//
// afterKill, when not nil, runs after each kill, before the store is
// checked: a store served by another process (PostgreSQL) may still be
// committing what the dead child had sent, and must let that end first.
func Crash(t *testing.T, target string, open Opener, kills int, afterKill func(t *testing.T)) {
	var acked []ack
	for i := range kills {
		acks := crashOnce(t, target, i)
		acked = append(acked, acks...)
		if afterKill != nil {
			afterKill(t)
		}
		checkAfterCrash(t, target, open, acked)
	}
	t.Logf("%d kills, %d acknowledged events, all present", kills, len(acked))
	require.NotEmpty(t, acked, "no child acknowledged anything before being killed")
}

// crashOnce runs one child and kills it; it returns what the child acknowledged.
func crashOnce(t *testing.T, target string, round int) []ack {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashEnv+"="+target)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())

	ready := make(chan struct{})
	eof := make(chan struct{})
	var acks []ack
	readErr := make(chan error, 1)
	go func() { // ends at EOF, when the child dies
		defer close(eof)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			if line == "ready" {
				close(ready)
				continue
			}
			a, err := parseAck(line)
			if err != nil {
				readErr <- err
				_, _ = io.Copy(io.Discard, stdout)
				return
			}
			acks = append(acks, a...)
		}
		readErr <- sc.Err()
	}()

	// Every fourth child dies at a random moment of its start (open,
	// migrations); the others a random while after they began appending.
	if round%4 == 0 {
		time.Sleep(time.Duration(rand.IntN(150)) * time.Millisecond)
	} else {
		select {
		case <-ready:
		case <-eof:
			_ = cmd.Wait()
			t.Fatalf("crash child %d died before it was ready; stderr:\n%s", round, stderr.String())
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("crash child %d never became ready; stderr:\n%s", round, stderr.String())
		}
		time.Sleep(time.Duration(rand.IntN(120)) * time.Millisecond)
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	require.NoError(t, <-readErr, "reading the child's acknowledgements")
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("crash child %d ended with %v before it was killed (does TestMain call storetest.CrashChild?); stderr:\n%s",
			round, err, stderr.String())
	}
	return acks
}

func parseAck(line string) ([]ack, error) {
	f := strings.Fields(line)
	if len(f) < 3 || f[0] != "ack" {
		return nil, fmt.Errorf("crash child said %q", line)
	}
	var out []ack
	for _, p := range f[2:] {
		seq, id, ok := strings.Cut(p, ":")
		n, err := strconv.ParseInt(seq, 10, 64)
		if !ok || err != nil {
			return nil, fmt.Errorf("crash child said %q", line)
		}
		out = append(out, ack{thread: f[1], seq: n, id: id})
	}
	return out, nil
}

// checkAfterCrash reopens the store and checks it against acked.
func checkAfterCrash(t *testing.T, target string, open Opener, acked []ack) {
	t.Helper()
	l, err := open(t.Context(), target)
	require.NoError(t, err, "reopening after a kill")
	defer l.Close()
	logs := map[string][]event.Event{}
	for i := range crashThreads {
		th := fmt.Sprintf("crash-%d", i)
		all := readAll(t, l, th)
		requireGapless(t, th, all)
		last, err := l.LastSeq(t.Context(), th)
		require.NoError(t, err)
		require.Equal(t, int64(len(all)), last, "LastSeq of %q after a kill", th)
		logs[th] = all
		checkBatches(t, th, all)
	}
	for _, a := range acked {
		all := logs[a.thread]
		require.LessOrEqual(t, a.seq, int64(len(all)), "acknowledged %s seq %d lost (thread has %d)", a.thread, a.seq, len(all))
		require.Equal(t, a.id, all[a.seq-1].ID, "acknowledged %s seq %d", a.thread, a.seq)
	}
}

// checkBatches checks that each append the child made (one Run) is whole:
// its events "1/n" .. "n/n" contiguous, in order.
func checkBatches(t *testing.T, thread string, all []event.Event) {
	t.Helper()
	for i := 0; i < len(all); {
		d, ok := all[i].Payload.(event.MessageDelta)
		require.True(t, ok, "%s seq %d: unexpected %s", thread, all[i].Seq, all[i].Type())
		var k, n int
		_, err := fmt.Sscanf(d.Text, "%d/%d", &k, &n)
		require.NoError(t, err)
		require.Equal(t, 1, k, "%s seq %d starts an append in its middle (%s)", thread, all[i].Seq, d.Text)
		require.LessOrEqual(t, i+n, len(all), "%s: append at seq %d is cut short", thread, all[i].Seq)
		for j := range n {
			e := all[i+j]
			require.Equal(t, all[i].Run, e.Run, "%s seq %d: append interleaved", thread, e.Seq)
			require.Equal(t, fmt.Sprintf("%d/%d", j+1, n), e.Payload.(event.MessageDelta).Text)
		}
		i += n
	}
}
