package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
)

// settle is how long a scenario lets the server finish what its last
// delivery started (run ends, commits) before it reads the server's
// counters again.
const settle = 250 * time.Millisecond

// streamTimeout bounds one stream: its own duration and a minute.
func (r *runner) streamTimeout() time.Duration {
	d := time.Minute
	if r.cfg.Rate > 0 {
		d += time.Duration(float64(r.cfg.Tokens) / r.cfg.Rate * float64(time.Second))
	}
	return d
}

func (r *runner) threads(t *target) *threadsClient {
	return &threadsClient{base: t.base, hc: r.hc, clk: r.clk}
}

// dialChats opens n agentchat sockets; on failure it closes those it
// opened.
func (r *runner) dialChats(ctx context.Context, t *target, n int) ([]*chatClient, error) {
	conns := make([]*chatClient, n)
	err := forEach(ctx, n, 32, func(ctx context.Context, i int) error {
		c, err := dialChat(ctx, t.wsURL(r.cfg.AgentchatChunks), r.hc, r.clk)
		conns[i] = c
		return err
	})
	if err != nil {
		closeChats(conns)
		return nil, err
	}
	return conns, nil
}

func closeChats(conns []*chatClient) {
	var wg sync.WaitGroup
	for _, c := range conns {
		if c != nil {
			wg.Go(c.close)
		}
	}
	wg.Wait()
}

// latency runs conc streams at once, each on a fresh thread or session,
// and records when every token arrived against when the upstream sent it,
// and what the server spent.
func (r *runner) latency(ctx context.Context, t *target, proto string, conc int) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	streams := make([]*stream, conc)
	recs := make([]*receipt, conc)
	for i := range conc {
		streams[i] = r.up.newStream(r.cfg.Tokens, r.cfg.Rate, false)
	}
	defer r.up.forget(streams...)
	var conns []*chatClient
	if proto == "agentchat" {
		var err error
		if conns, err = r.dialChats(ctx, t, conc); err != nil {
			return err
		}
		defer closeChats(conns)
		for i, c := range conns {
			recs[i] = c.expect(streams[i])
		}
	} else {
		for i := range conc {
			recs[i] = newReceipt(streams[i])
		}
	}
	tc := r.threads(t)
	if _, _, err := r.oneTokenReplies(ctx, t, proto, 1); err != nil {
		return err
	}

	before, err := t.stats()
	if err != nil {
		return err
	}
	dirBefore := dirSize(t.dataDir)
	start := make(chan struct{})
	errs := make([]error, conc)
	var wg sync.WaitGroup
	for i := range conc {
		wg.Go(func() {
			select {
			case <-start:
			case <-ctx.Done():
				return
			}
			var err error
			if proto == "agentchat" {
				err = conns[i].chat(ctx, uuid.NewString(), streams[i].prompt(), recs[i])
			} else {
				_, err = tc.post(ctx, uuid.NewString(), streams[i].prompt(), recs[i])
			}
			if err == nil {
				err = recs[i].wait(ctx, r.streamTimeout())
			}
			errs[i] = err
		})
	}
	close(start)
	wg.Wait()
	if err := sleep(ctx, settle); err != nil {
		return err
	}
	after, err := t.stats()
	if err != nil {
		return err
	}
	d := after.sub(before)
	grown := dirSize(t.dataDir) - dirBefore
	// The extra first-token samples come after the measurement, so that
	// the CPU and disk it counts are the measured streams' alone.
	var sampled []*receipt
	var sampledStreams []*stream
	if conc == 1 {
		if sampled, sampledStreams, err = r.oneTokenReplies(ctx, t, proto, firstTokenSamples); err != nil {
			return err
		}
	}

	agg := r.res.latency(proto, conc, t.round, t.side)
	agg.mu.Lock()
	defer agg.mu.Unlock()
	agg.cpu += d.cpu
	agg.writeBytes += d.writeBytes
	agg.dirGrowth += grown
	agg.streamed += conc * r.cfg.Tokens
	for i, rc := range sampled {
		agg.addTimes(rc, sampledStreams[i])
	}
	for i, rc := range recs {
		agg.addReceipt(rc, streams[i])
		if errs[i] != nil {
			agg.failures = append(agg.failures, errs[i].Error())
		}
	}
	return nil
}

// idle opens IdleSessions agentchat sessions, each with one short chat
// (or none), and records how much the server's RSS grew.
func (r *runner) idle(ctx context.Context, t *target) error {
	// One session first, so that what the first chat sets up lazily is not
	// counted as the sessions' cost.
	warm, err := r.dialChats(ctx, t, 1)
	if err != nil {
		return err
	}
	defer closeChats(warm)
	if err := r.shortChat(ctx, warm[0], uuid.NewString()); err != nil {
		return fmt.Errorf("warm-up chat: %w", err)
	}
	if err := sleep(ctx, 4*settle); err != nil {
		return err
	}
	before, err := t.stats()
	if err != nil {
		return err
	}
	conns, err := r.dialChats(ctx, t, r.cfg.IdleSessions)
	if err != nil {
		return err
	}
	defer closeChats(conns)
	if r.cfg.IdleChat {
		err := forEach(ctx, len(conns), 32, func(ctx context.Context, i int) error {
			return r.shortChat(ctx, conns[i], uuid.NewString())
		})
		if err != nil {
			return err
		}
	}
	if err := sleep(ctx, 4*settle); err != nil {
		return err
	}
	after, err := t.stats()
	if err != nil {
		return err
	}
	agg := r.res.idle(t.round, t.side)
	agg.mu.Lock()
	defer agg.mu.Unlock()
	agg.sessions += len(conns)
	agg.rssGrowth += after.rss - before.rss
	return nil
}

// firstTokenSamples is how many one-token replies, one after another, the
// 1-stream latency scenario times besides its measured stream, for the
// first-token and request-to-upstream medians: one stream per round is too
// few samples for a median.
const firstTokenSamples = 10

// oneTokenReplies streams n one-token replies on proto, one after another, on fresh
// threads or sessions, and returns their receipts with their streams.
// Before a measurement it warms the server up: what a server sets up on
// its first request (connections to the upstream, caches, the store's
// first pages) is not every stream's cost, as a server meets its first
// request once and its users afterwards. After one, it samples first-token
// times.
func (r *runner) oneTokenReplies(ctx context.Context, t *target, proto string, n int) ([]*receipt, []*stream, error) {
	var chat *chatClient
	if proto == "agentchat" {
		conns, err := r.dialChats(ctx, t, 1)
		if err != nil {
			return nil, nil, err
		}
		defer closeChats(conns)
		chat = conns[0]
	}
	var (
		recs    []*receipt
		streams []*stream
	)
	for range n {
		s := r.up.newStream(1, 0, false)
		defer r.up.forget(s)
		var rc *receipt
		var err error
		if chat != nil {
			rc = chat.expect(s)
			err = chat.chat(ctx, uuid.NewString(), s.prompt(), rc)
		} else {
			rc = newReceipt(s)
			_, err = r.threads(t).post(ctx, uuid.NewString(), s.prompt(), rc)
		}
		if err == nil {
			err = rc.wait(ctx, time.Minute)
		}
		if err == nil {
			// The reply's run ends (its last commits, the thread's
			// release) after its token is out: the next post waits, so
			// that it is timed on a quiet server, as the relay's is.
			err = sleep(ctx, settle/5)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("one-token reply: %w", err)
		}
		recs, streams = append(recs, rc), append(streams, s)
	}
	return recs, streams, nil
}

// shortChat sends a one-token chat on session and waits for the reply.
func (r *runner) shortChat(ctx context.Context, c *chatClient, session string) error {
	s := r.up.newStream(1, 0, false)
	defer r.up.forget(s)
	rc := c.expect(s)
	if err := c.chat(ctx, session, s.prompt(), rc); err != nil {
		return err
	}
	return rc.wait(ctx, time.Minute)
}

// fanThreads streams one reply to FanOut receivers of one thread: the
// POST that asks for it and FanOut-1 subscribers of the thread's events.
// The upstream holds the reply back until every subscriber is in.
func (r *runner) fanThreads(ctx context.Context, t *target) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	tc := r.threads(t)
	thread := uuid.NewString()

	warm := r.up.newStream(1, 0, false)
	defer r.up.forget(warm)
	wrc := newReceipt(warm)
	lastID, err := tc.post(ctx, thread, warm.prompt(), wrc)
	if err == nil {
		err = wrc.wait(ctx, time.Minute)
	}
	if err != nil {
		return fmt.Errorf("create the thread: %w", err)
	}

	fan := r.up.newStream(r.cfg.Tokens, r.cfg.Rate, true)
	defer r.up.forget(fan)
	defer fan.open() // on every path, so that nothing waits for it
	n := r.cfg.FanOut
	recs := make([]*receipt, n)
	for i := range recs {
		recs[i] = newReceipt(fan)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel() // before the wait above, on early returns
	wg.Go(func() { _, errs[0] = tc.post(ctx, thread, fan.prompt(), recs[0]) })
	if err := waitFor(ctx, fan.arrived, time.Minute, "the upstream call"); err != nil {
		return err
	}
	ready := make(chan struct{}, n)
	for i := 1; i < n; i++ {
		wg.Go(func() {
			var once sync.Once
			done := func() { once.Do(func() { ready <- struct{}{} }) }
			defer done()
			errs[i] = tc.subscribe(ctx, thread, lastID, recs[i], done)
		})
	}
	for i := 1; i < n; i++ {
		if err := waitFor(ctx, ready, time.Minute, "a subscriber's answer"); err != nil {
			return err
		}
	}
	return r.deliverFan(ctx, t, "threads", fan, recs, errs, &wg)
}

// fanChat streams one reply to FanOut sockets of one agentchat session.
// Each socket joins the session with a chat of its own (agentchat has no
// other way to join), answered at once with one token; the measured reply
// starts once every join has been answered everywhere.
func (r *runner) fanChat(ctx context.Context, t *target) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	n := r.cfg.FanOut
	conns, err := r.dialChats(ctx, t, n)
	if err != nil {
		return err
	}
	defer closeChats(conns)
	session := uuid.NewString()

	joins := make([]*stream, n)
	own := make([]*receipt, n)
	first := make([]*receipt, n) // the first socket's view of every join
	for i := range joins {
		joins[i] = r.up.newStream(1, 0, false)
		own[i] = conns[i].expect(joins[i])
		if i > 0 {
			first[i] = conns[0].expect(joins[i])
		}
	}
	defer r.up.forget(joins...)
	join := func(ctx context.Context, i int) error {
		if err := conns[i].chat(ctx, session, joins[i].prompt(), own[i]); err != nil {
			return err
		}
		if err := own[i].wait(ctx, time.Minute); err != nil {
			return fmt.Errorf("join %d: %w", i, err)
		}
		return nil
	}
	if err := join(ctx, 0); err != nil {
		return err
	}
	if err := forEach(ctx, n-1, 8, func(ctx context.Context, i int) error { return join(ctx, i+1) }); err != nil {
		return err
	}
	for _, rc := range first[1:] {
		if err := rc.wait(ctx, time.Minute); err != nil {
			return fmt.Errorf("the first socket's view of the joins: %w", err)
		}
	}
	if err := sleep(ctx, settle); err != nil {
		return err
	}

	fan := r.up.newStream(r.cfg.Tokens, r.cfg.Rate, true)
	defer r.up.forget(fan)
	defer fan.open()
	recs := make([]*receipt, n)
	for i, c := range conns {
		recs[i] = c.expect(fan)
	}
	if err := conns[0].chat(ctx, session, fan.prompt(), recs[0]); err != nil {
		return err
	}
	if err := waitFor(ctx, fan.arrived, time.Minute, "the upstream call"); err != nil {
		return err
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	return r.deliverFan(ctx, t, "agentchat", fan, recs, errs, &wg)
}

// deliverFan lets the held-back reply go and measures the server until
// every receiver has it; errs and wg are the receivers' (wg: those with a
// goroutine of their own).
func (r *runner) deliverFan(ctx context.Context, t *target, proto string, fan *stream, recs []*receipt, errs []error, wg *sync.WaitGroup) error {
	before, err := t.stats()
	if err != nil {
		return err
	}
	fan.open()
	waitErrs := make([]error, len(recs))
	for i, rc := range recs {
		waitErrs[i] = rc.wait(ctx, r.streamTimeout())
	}
	wg.Wait()
	for i, err := range waitErrs {
		if errs[i] == nil {
			errs[i] = err
		}
	}
	after, err := t.stats()
	if err != nil {
		return err
	}
	agg := r.res.fan(proto, t.round, t.side)
	agg.mu.Lock()
	defer agg.mu.Unlock()
	agg.cpu += after.sub(before).cpu
	last := fan.n - 1
	for i, rc := range recs {
		at, got, frames := rc.snapshot()
		agg.delivered += got
		agg.expected += fan.n
		agg.frames += frames
		if sent := fan.sentAt(last); at[last] != 0 && sent > 0 {
			agg.lastToken = append(agg.lastToken, at[last]-sent)
		}
		if errs[i] != nil {
			agg.failures = append(agg.failures, errs[i].Error())
		}
	}
	return nil
}

// openParallel is how many sessions the open scenario opens at once.
const openParallel = 4

// openTokens is the length of the reply that each session of the open
// scenario gets.
const openTokens = 5

// open opens OpenSessions sessions, openParallel at a time, each a new
// session with one turn of an openTokens-token reply: on agentchat a new
// socket that chats once and closes; on threads a POST on a new thread,
// read to its done. It records the server's CPU over them all.
func (r *runner) open(ctx context.Context, t *target, proto string) error {
	if _, _, err := r.oneTokenReplies(ctx, t, proto, 1); err != nil {
		return err
	}
	n := r.cfg.OpenSessions
	streams := make([]*stream, n)
	for i := range streams {
		streams[i] = r.up.newStream(openTokens, r.cfg.Rate, false)
	}
	defer r.up.forget(streams...)
	recs := make([]*receipt, n) // each set by the goroutine of its session
	before, err := t.stats()
	if err != nil {
		return err
	}
	err = forEach(ctx, n, openParallel, func(ctx context.Context, i int) error {
		if proto == "threads" {
			recs[i] = newReceipt(streams[i])
			if _, err := r.threads(t).post(ctx, uuid.NewString(), streams[i].prompt(), recs[i]); err != nil {
				return err
			}
			return recs[i].wait(ctx, r.streamTimeout())
		}
		c, err := dialChat(ctx, t.wsURL(r.cfg.AgentchatChunks), r.hc, r.clk)
		if err != nil {
			return err
		}
		defer c.close()
		recs[i] = c.expect(streams[i])
		if err := c.chat(ctx, uuid.NewString(), streams[i].prompt(), recs[i]); err != nil {
			return err
		}
		return recs[i].wait(ctx, r.streamTimeout())
	})
	if err != nil {
		return err
	}
	if err := sleep(ctx, settle); err != nil {
		return err
	}
	after, err := t.stats()
	if err != nil {
		return err
	}
	agg := r.res.opened(proto, t.round, t.side)
	agg.mu.Lock()
	defer agg.mu.Unlock()
	agg.cpu += after.sub(before).cpu
	agg.sessions += n
	for _, rc := range recs {
		_, got, _ := rc.snapshot()
		agg.delivered += got
		agg.expected += openTokens
	}
	return nil
}

// waitFor waits until ch is closed or yields a value.
func waitFor(ctx context.Context, ch <-chan struct{}, timeout time.Duration, what string) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return errors.New(what + " did not come within " + timeout.String())
	}
}
