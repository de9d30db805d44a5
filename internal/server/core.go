package server

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"golang.org/x/time/rate"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/identity"
	"github.com/agentwire/agentwire/internal/protocol"
	"github.com/agentwire/agentwire/internal/runs"
	"github.com/agentwire/agentwire/internal/store"
	"github.com/agentwire/agentwire/internal/thread"
)

// core is protocol.Core over the thread service and the run manager. Every
// call checks who makes it: a thread belongs to the principal whose input
// (or subscription) made it, and another principal finds nothing there,
// not even that it exists. Thread ids are checked and canonicalised here,
// once for every protocol. Errors become *protocol.Error values, the one
// vocabulary every adapter maps to its own frames.
type core struct {
	threads *thread.Service
	runs    *runs.Manager
	owners  store.Owners
	limits  *runLimits // nil: no limit on starting runs

	// known remembers owners already read: a thread's owner never changes.
	knownMu sync.Mutex
	known   map[string]string
}

var _ protocol.Core = (*core)(nil)

// maxKnownOwners bounds the owner cache; past it the cache starts over.
const maxKnownOwners = 100_000

// errNotFound answers a principal about a thread that is not theirs,
// exactly as about one that does not exist.
var errNotFound = &protocol.Error{Code: protocol.CodeNotFound, Message: "thread not found"}

// access checks the principal of ctx may use thread, and returns the
// thread's canonical id. With own set, a thread that has no owner yet
// becomes the principal's.
func (c *core) access(ctx context.Context, thread string, own bool) (string, error) {
	id, err := protocol.CanonicalThread(thread)
	if err != nil {
		return "", err
	}
	owner, ok, err := c.owner(ctx, id, own)
	if err != nil {
		return "", err
	}
	if ok && owner != identity.FromContext(ctx).ID {
		return "", errNotFound
	}
	return id, nil
}

// owner returns the thread's owner; ok is false when it has none. With
// own set, a thread that has no owner yet becomes the principal's of ctx.
func (c *core) owner(ctx context.Context, id string, own bool) (owner string, ok bool, err error) {
	c.knownMu.Lock()
	owner, ok = c.known[id]
	c.knownMu.Unlock()
	if ok {
		return owner, true, nil
	}
	if own {
		owner, err = c.owners.OwnThread(ctx, id, identity.FromContext(ctx).ID)
		ok = err == nil
	} else {
		owner, ok, err = c.owners.ThreadOwner(ctx, id)
	}
	if err != nil || !ok {
		return "", false, coreError(err)
	}
	c.knownMu.Lock()
	if len(c.known) >= maxKnownOwners {
		clear(c.known)
	}
	c.known[id] = owner
	c.knownMu.Unlock()
	return owner, true, nil
}

func (c *core) LastSeq(ctx context.Context, t string) (int64, error) {
	t, err := c.access(ctx, t, false)
	if err != nil {
		return 0, err
	}
	seq, err := c.threads.LastSeq(ctx, t)
	return seq, coreError(err)
}

func (c *core) Read(ctx context.Context, t string, after int64, limit int) ([]event.Event, error) {
	t, err := c.access(ctx, t, false)
	if err != nil {
		return nil, err
	}
	evs, err := c.threads.Read(ctx, t, after, limit)
	return evs, coreError(err)
}

func (c *core) History(ctx context.Context, t string) ([]event.Event, error) {
	t, err := c.access(ctx, t, false)
	if err != nil {
		return nil, err
	}
	evs, err := c.threads.History(ctx, t)
	return evs, coreError(err)
}

// Pull implements protocol.Core. Following a thread does not make it the
// follower's: otherwise a read of a thread that does not exist yet would
// claim it, and lock its real user out. A thread nobody owns is followed
// until its first event, and that event is handed on only if the thread
// is then the follower's (whoever posts first owns it).
func (c *core) Pull(ctx context.Context, t string, after int64, notify func()) (*thread.Pull, error) {
	id, err := protocol.CanonicalThread(t)
	if err != nil {
		return nil, err
	}
	owner, owned, err := c.owner(ctx, id, false)
	if err != nil {
		return nil, err
	}
	me := identity.FromContext(ctx).ID
	if owned && owner != me {
		return nil, errNotFound
	}
	opts := thread.PullOptions{Notify: notify}
	if !owned {
		who := context.WithoutCancel(ctx)
		opts.Admit = func(context.Context) error {
			_, err := c.access(who, id, false)
			return err
		}
	}
	p, err := c.threads.Pull(ctx, id, after, opts)
	if err != nil {
		return nil, coreError(err)
	}
	return p, nil
}

// Own implements protocol.Core.
func (c *core) Own(ctx context.Context, t string) error {
	_, err := c.access(ctx, t, true)
	return err
}

func (c *core) Post(ctx context.Context, t string, in runs.Input) (runs.Posted, error) {
	if !in.Options.Compact { // a compaction has no message
		if err := protocol.CheckText(in.Text); err != nil {
			return runs.Posted{}, err
		}
	}
	t, err := c.access(ctx, t, true)
	if err != nil {
		return runs.Posted{}, err
	}
	if err := c.limits.allow(identity.FromContext(ctx).ID); err != nil {
		return runs.Posted{}, err
	}
	p, err := c.runs.Post(ctx, t, in)
	return p, coreError(err)
}

func (c *core) Resolve(ctx context.Context, t string, cmd event.Command) error {
	t, err := c.access(ctx, t, false)
	if err != nil {
		return err
	}
	return coreError(c.runs.Resolve(ctx, t, cmd))
}

func (c *core) Cancel(ctx context.Context, t string) error {
	t, err := c.access(ctx, t, false)
	if err != nil {
		return err
	}
	return coreError(c.runs.Cancel(ctx, t))
}

func (c *core) Active(ctx context.Context, t string) (string, error) {
	t, err := c.access(ctx, t, false)
	if err != nil {
		return "", err
	}
	run, err := c.runs.Active(ctx, t)
	return run, coreError(err)
}

// runLimits holds each principal to a rate of starting runs.
type runLimits struct {
	rate  rate.Limit
	burst int

	mu  sync.Mutex
	per map[string]*rate.Limiter
}

func newRunLimits(perMinute, burst int) *runLimits {
	if perMinute <= 0 {
		return nil
	}
	return &runLimits{rate: rate.Limit(float64(perMinute) / 60), burst: burst, per: map[string]*rate.Limiter{}}
}

// allow takes one run from the principal's bucket, or says to wait.
func (l *runLimits) allow(principal string) error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	lim := l.per[principal]
	if lim == nil {
		if len(l.per) >= maxKnownOwners {
			clear(l.per)
		}
		lim = rate.NewLimiter(l.rate, l.burst)
		l.per[principal] = lim
	}
	l.mu.Unlock()
	if !lim.Allow() {
		return protocol.Errorf(protocol.CodeRateLimited, "too many messages: at most %d runs a minute; try again in a moment", int(float64(l.rate)*60+0.5))
	}
	return nil
}

// coreError maps the thread service's and the run manager's errors onto
// protocol codes; anything else is internal. nil stays nil.
func coreError(err error) error {
	if err == nil {
		return nil
	}
	var afterEnd *thread.AfterEndError
	switch {
	case errors.As(err, &afterEnd):
		return &protocol.Error{Code: protocol.CodeInvalid, Cause: err,
			Message: fmt.Sprintf("seq %d is past the thread's last event, %d", afterEnd.After, afterEnd.Last)}
	case errors.Is(err, runs.ErrUnknownRequest):
		return protocol.Wrap(protocol.CodeUnknownRequest, err, "no pending request has that id")
	case errors.Is(err, runs.ErrNoRun):
		return protocol.Wrap(protocol.CodeNotFound, err, "the thread has no active run")
	case errors.Is(err, runs.ErrUnavailable):
		return protocol.Wrap(protocol.CodeUnavailable, err, "this server cannot start runs now; try again shortly")
	case errors.Is(err, runs.ErrShuttingDown), errors.Is(err, thread.ErrClosed), errors.Is(err, store.ErrClosed):
		return protocol.Wrap(protocol.CodeUnavailable, err, "the server is shutting down; try again shortly")
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return protocol.Wrap(protocol.CodeUnavailable, err, "the request was cancelled")
	}
	return protocol.AsError(err)
}

// Record implements protocol.Core. Writing to a thread makes it the
// writer's, as posting does.
func (c *core) Record(ctx context.Context, t string, p event.Payload) (event.Event, error) {
	t, err := c.access(ctx, t, true)
	if err != nil {
		return event.Event{}, err
	}
	evs, err := c.threads.Append(ctx, t, event.New(t, "", p))
	if err != nil {
		return event.Event{}, coreError(err)
	}
	if len(evs) == 0 {
		return event.Event{}, protocol.Internal(errors.New("record: the store committed nothing"))
	}
	return evs[0], nil
}
