// Package cli is agentwire's command line besides serving: `agentwire
// threads ls|show|export|import` reads and writes threads' logs in the
// store a server uses (SQLite under --data-dir, or PostgreSQL with
// --database-url), `agentwire validate` checks frames against the
// protocols' schemas, and `agentwire chat` is a terminal client of a running
// server over any of its protocols. cmd/server dispatches to it.
package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/store"
	"github.com/agentwire/agentwire/internal/store/postgres"
	"github.com/agentwire/agentwire/internal/store/sqlite"
)

// Line is one event of an exported thread: a line of JSONL.
type Line struct {
	Thread  string          `json:"thread"`
	Seq     int64           `json:"seq"`
	ID      string          `json:"id"`
	Run     string          `json:"run,omitempty"`
	Time    time.Time       `json:"time"`
	Type    event.Type      `json:"type"`
	Payload json.RawMessage `json:"payload"`
}

// Threads runs `agentwire threads SUBCOMMAND [flags] [args]`.
func Threads(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usage(stderr, threadsUsage)
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("threads "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dataDir := fs.String("data-dir", env(getenv, "AGENTWIRE_DATA_DIR", "./data"), "folder of the SQLite database")
	dbURL := fs.String("database-url", getenv("AGENTWIRE_DATABASE_URL"), "postgres:// URL of the store (instead of SQLite)")
	out := fs.String("o", "-", "export: file to write (- for standard output)")
	owner := fs.String("owner", "", "import: the principal the imported thread belongs to (default: the exported owner)")
	quiet := fs.Bool("q", false, "import/export: no progress on standard error")
	limit := fs.Int("n", 100, "ls: how many threads")
	after := fs.String("after", "", "ls: list threads after this id")
	if err := fs.Parse(args); err != nil {
		return err
	}
	st, err := open(ctx, *dataDir, *dbURL)
	if err != nil {
		return err
	}
	defer st.Close()
	switch sub {
	case "ls":
		return list(ctx, st, *after, *limit, stdout)
	case "show":
		if fs.NArg() != 1 {
			return errors.New("threads show: want one thread id")
		}
		return show(ctx, st, fs.Arg(0), stdout)
	case "export":
		if fs.NArg() != 1 {
			return errors.New("threads export: want one thread id")
		}
		prog := progress(stderr, *quiet, "exported")
		if *out == "-" {
			return Export(ctx, st, fs.Arg(0), stdout, prog)
		}
		f, err := os.Create(*out)
		if err != nil {
			return err
		}
		if err := Export(ctx, st, fs.Arg(0), f, prog); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	case "import":
		in := stdin
		if fs.NArg() == 1 && fs.Arg(0) != "-" {
			f, err := os.Open(fs.Arg(0))
			if err != nil {
				return err
			}
			defer f.Close()
			in = f
		}
		th, n, err := Import(ctx, st, in, *owner, progress(stderr, *quiet, "imported"))
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "imported %d events into thread %s\n", n, th)
		return nil
	}
	return usage(stderr, threadsUsage)
}

const threadsUsage = `usage: agentwire threads ls|show|export|import [flags] [args]
  ls                      list threads (id, events, last change)
  show ID                 print a thread's conversation
  export ID [-o FILE]     write a thread's log as JSONL (one event a line; the owner first)
  import [FILE|-]         add an exported thread to the store (it must not have events yet)
flags: --data-dir DIR (SQLite, default ./data) or --database-url postgres://...; -q: no progress`

func usage(w io.Writer, text string) error {
	fmt.Fprintln(w, text)
	return flag.ErrHelp
}

func env(getenv func(string) string, k, def string) string {
	if v := getenv(k); v != "" {
		return v
	}
	return def
}

// open opens the store a server would: PostgreSQL at url, else SQLite in
// dir.
func open(ctx context.Context, dir, url string) (store.Store, error) {
	log := slog.New(slog.DiscardHandler)
	if url != "" {
		return postgres.Open(ctx, url, postgres.Options{Logger: log})
	}
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("--data-dir %s: %w", dir, err)
	}
	return sqlite.Open(ctx, sqlite.Options{Dir: dir, Logger: log})
}

func list(ctx context.Context, st store.Store, after string, limit int, w io.Writer) error {
	ts, err := st.Threads(ctx, after, limit)
	if err != nil {
		return err
	}
	for _, t := range ts {
		fmt.Fprintf(w, "%s\t%d events\t%s\n", t.ID, t.LastSeq, t.Updated.Format(time.RFC3339))
	}
	return nil
}

func show(ctx context.Context, st store.Store, th string, w io.Writer) error {
	evs, err := st.History(ctx, th)
	if err != nil {
		return err
	}
	if len(evs) == 0 {
		return fmt.Errorf("thread %s: no such thread", th)
	}
	for _, e := range evs {
		switch p := e.Payload.(type) {
		case event.MessageUser:
			fmt.Fprintf(w, "user: %s\n", p.Text)
		case event.MessageCompleted:
			if p.Text != "" && p.Purpose == "" {
				fmt.Fprintf(w, "%s: %s\n", p.Role, p.Text)
			}
		case event.ToolCallCompleted:
			fmt.Fprintf(w, "tool call: %s %s\n", p.Name, p.Arguments)
		case event.ToolExecCompleted:
			fmt.Fprintf(w, "tool result (%s): %s\n", p.Outcome, oneLine(p.Result, 200))
		}
	}
	return nil
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

// header is the first line of an export: the thread and its owner.
type header struct {
	Thread string `json:"agentwire_thread"`
	Owner  string `json:"owner,omitempty"`
}

// readBatch is how many events an export reads at once.
const readBatch = 1000

// Export writes the thread's whole log to w as JSONL: a header line, then
// one Line per event in seq order. progress, if not nil, is told the
// count so far and the total.
func Export(ctx context.Context, st store.Store, th string, w io.Writer, progress func(done, total int64)) error {
	last, err := st.LastSeq(ctx, th)
	if err != nil {
		return err
	}
	if last == 0 {
		return fmt.Errorf("thread %s: no such thread", th)
	}
	owner, _, err := st.ThreadOwner(ctx, th)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	if err := enc.Encode(header{Thread: th, Owner: owner}); err != nil {
		return err
	}
	for after := int64(0); after < last; {
		evs, err := st.Read(ctx, th, after, readBatch)
		if err != nil {
			return err
		}
		if len(evs) == 0 {
			break
		}
		for _, e := range evs {
			p, err := event.EncodePayload(e.Payload)
			if err != nil {
				return fmt.Errorf("event %d: %w", e.Seq, err)
			}
			if err := enc.Encode(Line{Thread: e.Thread, Seq: e.Seq, ID: e.ID, Run: e.Run, Time: e.Time, Type: e.Type(), Payload: p}); err != nil {
				return err
			}
		}
		after = evs[len(evs)-1].Seq
		if progress != nil {
			progress(after, last)
		}
	}
	return bw.Flush()
}

// Import reads an export and appends its events, with their ids, runs
// and times, to a thread that has none yet; owner (or the export's) is
// made its owner. It returns the thread and how many events it appended.
func Import(ctx context.Context, st store.Store, r io.Reader, owner string, progress func(done, total int64)) (string, int64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	if !sc.Scan() {
		return "", 0, fmt.Errorf("import: no header line: %v", sc.Err())
	}
	var h header
	if err := json.Unmarshal(sc.Bytes(), &h); err != nil || h.Thread == "" {
		return "", 0, errors.New("import: the first line is not an agentwire export's header")
	}
	if last, err := st.LastSeq(ctx, h.Thread); err != nil {
		return "", 0, err
	} else if last > 0 {
		return "", 0, fmt.Errorf("import: thread %s already has %d events", h.Thread, last)
	}
	if owner == "" {
		owner = h.Owner
	}
	if owner != "" {
		if _, err := st.OwnThread(ctx, h.Thread, owner); err != nil {
			return "", 0, err
		}
	}
	var (
		batch []event.Event
		n     int64
	)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		got, err := st.Append(ctx, h.Thread, batch...)
		if err != nil {
			return err
		}
		for i, e := range got {
			if want := n + int64(i) + 1; e.Seq != want {
				return fmt.Errorf("import: event %s got seq %d, want %d", e.ID, e.Seq, want)
			}
		}
		n += int64(len(got))
		batch = batch[:0]
		if progress != nil {
			progress(n, -1)
		}
		return nil
	}
	for line := 2; sc.Scan(); line++ {
		var l Line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return h.Thread, n, fmt.Errorf("import: line %d: %w", line, err)
		}
		if l.Thread != h.Thread {
			return h.Thread, n, fmt.Errorf("import: line %d is of thread %s, not %s", line, l.Thread, h.Thread)
		}
		if want := n + int64(len(batch)) + 1; l.Seq != want {
			return h.Thread, n, fmt.Errorf("import: line %d has seq %d, want %d", line, l.Seq, want)
		}
		p, err := event.DecodePayload(l.Type, l.Payload)
		if err != nil {
			return h.Thread, n, fmt.Errorf("import: line %d: %w", line, err)
		}
		batch = append(batch, event.Event{Thread: h.Thread, ID: l.ID, Run: l.Run, Time: l.Time, Payload: p})
		if len(batch) == readBatch {
			if err := flush(); err != nil {
				return h.Thread, n, err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return h.Thread, n, err
	}
	return h.Thread, n, flush()
}

// progress reports long exports and imports on w, at most every second.
func progress(w io.Writer, quiet bool, what string) func(done, total int64) {
	if quiet {
		return nil
	}
	var last time.Time
	return func(done, total int64) {
		if time.Since(last) < time.Second && done != total {
			return
		}
		last = time.Now()
		if total > 0 {
			fmt.Fprintf(w, "%s %d of %d events\n", what, done, total)
		} else {
			fmt.Fprintf(w, "%s %d events\n", what, done)
		}
	}
}
