package cli

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
)

// `agentwire chat` is a line-oriented terminal client of a running server,
// over any of its five protocols. The loop here is the same for all of
// them: it reads a line from stdin, sends it as a turn, prints what the
// server streams until the turn ends, and reads the next line. When the
// server asks something (an approval, a question) the next line answers it.
// Each protocol is a conversation (chat_<protocol>.go): it turns the user's
// lines into the protocol's frames and the server's frames into items, the
// protocol-neutral things the printer shows.

// conversation is one protocol's side of a chat.
type conversation interface {
	// open connects (and shows the thread's earlier conversation when the
	// chat rejoins it). Items go to the sink given to the constructor.
	open(ctx context.Context) error
	// send posts text as a new turn.
	send(ctx context.Context, text string) error
	// answer answers q with the user's line. An *answerError is a line
	// the protocol cannot send (the question stays open).
	answer(ctx context.Context, q question, text string) error
	// interrupt stops the running turn where the protocol can (a cancel,
	// or a denial that ends the turn); false when it cannot.
	interrupt(ctx context.Context, pending *question) (bool, error)
	// close disconnects and waits for the conversation's goroutines.
	close() error
}

// kind is what an item shows.
type kind int

const (
	kText       kind = iota // a piece of a message (who, key: the message)
	kTextEnd                // the end of message key ("" for any)
	kUser                   // a user's turn (from history, or another client)
	kThinking               // reasoning, whole
	kToolCall               // a tool call: name, text (its arguments)
	kToolResult             // a tool's result: name, text, ok
	kNotice                 // a system notice
	kError                  // an error the server sent
	kAsk                    // a question the next line answers
	kAskDone                // question key was answered elsewhere or timed out
	kTurnStart              // a turn is running
	kTurnEnd                // the running turn ended
	kMaybeEnd               // the turn may have ended (no frame says so)
	kClosed                 // the connection ended; err says why
)

// item is one thing to show, or a change of the turn's state.
type item struct {
	kind kind
	who  string
	key  string
	text string
	name string
	ok   bool
	q    question
	err  error
}

// question is something the server asks the user.
type question struct {
	id      string   // the protocol's id for it
	prompt  string   // what is asked
	choices []string // the answers an approval takes; none for free text
	secret  bool     // the answer should not be echoed
	ui      bool     // a UI component: the answer is JSON (or text)
	ref     string   // protocol data needed to answer (a run id)
}

// answerError is a line that cannot answer the question; it is shown and
// the question stays open.
type answerError struct{ msg string }

func (e *answerError) Error() string { return e.msg }

// sink carries a conversation's items to the chat loop. It never blocks
// (a replay can be long, and comes while the loop waits for open): items
// queue until the loop takes them, which it does before reading stdin.
type sink struct {
	mu   *sync.Mutex
	q    *[]item
	wake chan struct{}
}

func newSink() sink { return sink{mu: new(sync.Mutex), q: new([]item), wake: make(chan struct{}, 1)} }

func (s sink) emit(it item) {
	s.mu.Lock()
	*s.q = append(*s.q, it)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// next takes the oldest item, if any.
func (s sink) next() (item, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(*s.q) == 0 {
		return item{}, false
	}
	it := (*s.q)[0]
	*s.q = (*s.q)[1:]
	return it, true
}

// chatConfig is the parsed command line of `agentwire chat`.
type chatConfig struct {
	protocol   string
	base       *url.URL // http(s) base of the server
	thread     string
	rejoin     bool // --thread was given
	token      string
	idle       time.Duration
	agent      string // loom
	workflow   string // ag2
	enterprise string // ag2
	user       string // ag2
}

// ChatIO is what the chat reads and writes. Each value on Interrupts is
// one Ctrl-C.
type ChatIO struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Interrupts     <-chan struct{}
}

// Chat runs `agentwire chat [flags]` as the binary does: ctx ending (the
// first Ctrl-C or SIGTERM) interrupts the running turn, and one more
// Ctrl-C exits.
func Chat(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	intr := make(chan struct{}, 1)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-ctx.Done():
		case <-done:
			return
		}
		// The first signal ended ctx; later ones come here.
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
		defer signal.Stop(sig)
		for {
			select {
			case intr <- struct{}{}:
			case <-done:
				return
			}
			select {
			case <-sig:
			case <-done:
				return
			}
		}
	})
	defer wg.Wait()
	defer close(done)
	return RunChat(context.WithoutCancel(ctx), args, getenv, ChatIO{Stdin: stdin, Stdout: stdout, Stderr: stderr, Interrupts: intr})
}

const chatUsage = `usage: agentwire chat --protocol agentchat|ag2|threads|loom|agentloop [flags]
  Reads lines from standard input and sends each as a turn; prints the answer as it
  streams. When the agent asks for an approval or an answer, the next line answers it.
  At the end of input the chat finishes the running turn and exits. Ctrl-C stops the
  running turn where the protocol can (Loom cancels it; AgentLoop denies a pending
  approval with no-exit); a second Ctrl-C exits.
flags:`

// RunChat runs the chat with explicit I/O.
func RunChat(ctx context.Context, args []string, getenv func(string) string, cio ChatIO) error {
	cfg, err := parseChat(args, getenv, cio.Stderr)
	if err != nil {
		return err
	}
	out := newPrinter(cio.Stdout)
	s := newSink()
	conv, err := newConversation(cfg, s)
	if err != nil {
		return err
	}
	l := &chatLoop{cfg: cfg, conv: conv, sink: s, out: out, cio: cio}
	err = l.run(ctx)
	if cerr := conv.close(); err == nil && cerr != nil && !errors.Is(cerr, context.Canceled) {
		err = cerr
	}
	l.stopInput()
	return err
}

func parseChat(args []string, getenv func(string) string, stderr io.Writer) (chatConfig, error) {
	fs := flag.NewFlagSet("chat", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, chatUsage)
		fs.PrintDefaults()
	}
	proto := fs.String("protocol", "", "the protocol to speak: agentchat, ag2, threads, loom or agentloop (required)")
	rawURL := fs.String("url", "", "the server's base URL (http://, https://, ws:// or wss://, with a path prefix if it is behind one); the protocol's path is added")
	addr := fs.String("addr", "127.0.0.1:8080", "the server's host:port (without --url)")
	thread := fs.String("thread", "", "rejoin this thread (its id was printed when the chat began); default: a new thread")
	token := fs.String("token", getenv("AGENTWIRE_TOKEN"), "credential for a server with --auth keys or jwt, sent as Authorization: Bearer (default $AGENTWIRE_TOKEN)")
	idle := fs.Duration("idle", 2*time.Second, "agentchat: how long a quiet socket means the turn is over (agentchat has no end-of-turn frame)")
	agent := fs.String("agent", "react", "loom: the strategy (react, dup, tot, got)")
	workflow := fs.String("workflow", "default", "ag2: the workflow of the chat")
	enterprise := fs.String("enterprise", "cli", "ag2: the enterprise_id of the chat")
	user := fs.String("user", "cli", "ag2: the user_id of the chat")
	if err := fs.Parse(args); err != nil {
		return chatConfig{}, err
	}
	if fs.NArg() > 0 {
		return chatConfig{}, fmt.Errorf("chat: unexpected argument %q", fs.Arg(0))
	}
	cfg := chatConfig{protocol: *proto, thread: strings.TrimSpace(*thread), token: *token, idle: *idle,
		agent: *agent, workflow: *workflow, enterprise: *enterprise, user: *user}
	switch cfg.protocol {
	case "agentchat", "ag2", "threads", "loom", "agentloop":
	case "":
		fs.Usage()
		return chatConfig{}, errors.New("chat: --protocol is required")
	default:
		return chatConfig{}, fmt.Errorf("chat: --protocol %q: want agentchat, ag2, threads, loom or agentloop", cfg.protocol)
	}
	base := *rawURL
	if base == "" {
		base = "http://" + *addr
	}
	u, err := url.Parse(base)
	if err != nil {
		return chatConfig{}, fmt.Errorf("chat: --url: %w", err)
	}
	switch u.Scheme {
	case "http", "ws":
		u.Scheme = "http"
	case "https", "wss":
		u.Scheme = "https"
	default:
		return chatConfig{}, fmt.Errorf("chat: --url %q: the scheme must be http, https, ws or wss", base)
	}
	if u.Host == "" {
		return chatConfig{}, fmt.Errorf("chat: --url %q has no host", base)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawQuery, u.Fragment = "", ""
	cfg.base = u
	if cfg.thread != "" {
		cfg.rejoin = true
		if cfg.protocol == "threads" {
			id, err := uuid.Parse(cfg.thread)
			if err != nil {
				return chatConfig{}, fmt.Errorf("chat: --thread %q: the threads protocol names threads by UUID", cfg.thread)
			}
			cfg.thread = id.String()
		}
	} else {
		// A UUID names a thread every protocol can reach (the threads
		// API takes only UUIDs).
		cfg.thread = uuid.NewString()
	}
	if cfg.idle <= 0 {
		return chatConfig{}, errors.New("chat: --idle must be positive")
	}
	return cfg, nil
}

func newConversation(cfg chatConfig, s sink) (conversation, error) {
	switch cfg.protocol {
	case "agentchat":
		return newAgentchat(cfg, s), nil
	case "ag2":
		return newAG2(cfg, s), nil
	case "threads":
		return newThreads(cfg, s)
	case "loom":
		return newLoom(cfg, s), nil
	case "agentloop":
		return newAgentloop(cfg, s), nil
	}
	return nil, fmt.Errorf("chat: unknown protocol %q", cfg.protocol)
}

// chatLoop runs one chat: lines in, items out.
type chatLoop struct {
	cfg  chatConfig
	conv conversation
	sink sink
	out  *printer
	cio  ChatIO

	lines    chan string
	readDone chan struct{}
	quit     chan struct{}
}

// startInput starts the goroutine that reads stdin a line at a time. It
// hands a line over only when the loop takes it, so lines typed (or piped)
// ahead wait until the turn before them has ended.
func (l *chatLoop) startInput() {
	l.lines = make(chan string)
	l.readDone = make(chan struct{})
	l.quit = make(chan struct{})
	go func() {
		defer close(l.readDone)
		defer close(l.lines)
		sc := bufio.NewScanner(l.cio.Stdin)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			select {
			case l.lines <- strings.TrimRight(sc.Text(), "\r"):
			case <-l.quit:
				return
			}
		}
	}()
}

// stopInput ends the reader: at once when it waits to hand over a line;
// when it is blocked reading a stdin that does not end (a terminal), it
// ends with the process, and is not waited for.
func (l *chatLoop) stopInput() {
	if l.quit == nil {
		return
	}
	close(l.quit)
	select {
	case <-l.readDone:
	case <-time.After(100 * time.Millisecond):
	}
}

func (l *chatLoop) run(ctx context.Context) error {
	if err := l.conv.open(ctx); err != nil {
		return fmt.Errorf("chat: cannot connect to the %s server at %s: %w", l.cfg.protocol, l.cfg.base, err)
	}
	if l.cfg.rejoin {
		l.out.line("thread: " + l.cfg.thread + " (rejoined)")
	} else {
		l.out.line("thread: " + l.cfg.thread + " (resume it with --thread " + l.cfg.thread + ")")
	}
	l.startInput()
	var (
		busy        bool
		pending     *question
		eof         bool
		interrupted bool
		settle      *time.Timer
		settleC     <-chan time.Time
	)
	stopSettle := func() {
		if settle != nil {
			settle.Stop()
			settle, settleC = nil, nil
		}
	}
	defer stopSettle()
	for {
		if it, ok := l.sink.next(); ok {
			if it.kind != kMaybeEnd {
				stopSettle()
			}
			switch it.kind {
			case kAsk:
				q := it.q
				pending = &q
				busy = true
			case kAskDone:
				if pending != nil && pending.id == it.key {
					pending = nil
				}
			case kTurnStart:
				busy = true
			case kTurnEnd:
				busy, pending = false, nil
			case kMaybeEnd:
				stopSettle()
				if busy && pending == nil {
					settle = time.NewTimer(l.cfg.idle)
					settleC = settle.C
				}
			case kClosed:
				l.out.show(it)
				return l.lost(it.err)
			}
			l.out.show(it)
			continue
		}
		if eof && !busy {
			return nil
		}
		if eof && pending != nil {
			l.out.line("notice: the input ended while the agent waits for an answer; the run waits for it: rejoin with --thread " + l.cfg.thread + " to answer")
			return nil
		}
		var in <-chan string
		if !eof && (!busy || pending != nil) {
			in = l.lines
		}
		select {
		case <-l.sink.wake:
		case line, ok := <-in:
			if !ok {
				eof = true
				continue
			}
			if pending != nil {
				q := *pending
				err := l.conv.answer(ctx, q, line)
				var ae *answerError
				if errors.As(err, &ae) {
					l.out.line("error: " + ae.msg)
					l.out.ask(q)
					continue
				}
				if err != nil {
					return l.lost(err)
				}
				pending = nil
				continue
			}
			if strings.TrimSpace(line) == "" {
				continue
			}
			busy, interrupted = true, false
			if err := l.conv.send(ctx, line); err != nil {
				return l.lost(err)
			}
		case <-settleC:
			settle, settleC = nil, nil
			busy = false
			l.out.endText()
		case <-l.cio.Interrupts:
			if !busy {
				l.out.endText()
				return nil
			}
			if interrupted {
				l.out.endText()
				return errors.New("chat: interrupted")
			}
			interrupted = true
			ok, err := l.conv.interrupt(ctx, pending)
			if err != nil {
				return l.lost(err)
			}
			l.out.endText()
			if ok {
				l.out.line("notice: stopping the turn (Ctrl-C again exits)")
				pending = nil
			} else {
				l.out.line("notice: " + l.cfg.protocol + " cannot stop a running turn; Ctrl-C again exits")
			}
		}
	}
}

// lost reports a connection that failed mid-chat.
func (l *chatLoop) lost(err error) error {
	l.out.endText()
	if err == nil {
		err = errors.New("closed")
	}
	return fmt.Errorf("chat: the connection to the server ended: %w (rejoin with --thread %s)", err, l.cfg.thread)
}

// normalizeAnswer is an answer to an approval as the maps of words take it.
func normalizeAnswer(s string) string { return strings.ToLower(strings.TrimSpace(s)) }
