// Package memory is a store.Log held in memory: per-thread slices behind one
// lock. It behaves like the durable backends (same validation, same seq and
// time rules, payloads stored encoded) but keeps nothing across restarts, so
// it serves fast unit tests and callers that want no disk.
package memory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/store"
)

// Log is an in-memory store.Log. The zero value is not usable; call New.
type Log struct {
	mu      sync.RWMutex
	closed  bool
	threads map[string]*thread
	claims  map[string]store.RunClaim
	queues  map[string][]store.QueuedInput
	owners  map[string]string
}

var _ store.Store = (*Log)(nil)

// thread is one thread's log.
type thread struct {
	records          []record
	created, updated time.Time
}

// record is one committed event as a durable store keeps it: the payload
// encoded, so later changes to the appender's values cannot reach readers and
// every reader decodes a copy of its own.
type record struct {
	event event.Event // Payload nil
	typ   event.Type
	data  []byte
}

// New returns an empty log.
func New() *Log {
	return &Log{threads: map[string]*thread{}, claims: map[string]store.RunClaim{}, queues: map[string][]store.QueuedInput{}, owners: map[string]string{}}
}

// Append implements store.Log. Events are checked and encoded before the
// lock is taken, so a bad event commits nothing.
func (l *Log) Append(ctx context.Context, threadID string, events ...event.Event) ([]event.Event, error) {
	out, recs, err := prepare(ctx, threadID, events)
	if err != nil || len(out) == 0 {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, store.ErrClosed
	}
	l.appendLocked(threadID, out, recs)
	return out, nil
}

// ClaimAndAppend implements store.Runs: the claim and the events are made
// under one hold of the lock.
func (l *Log) ClaimAndAppend(ctx context.Context, c store.RunClaim, lease time.Duration, events ...event.Event) ([]event.Event, error) {
	if err := checkClaim(c); err != nil {
		return nil, err
	}
	out, recs, err := prepare(ctx, c.Thread, events)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.claimLocked(ctx, c, lease); err != nil {
		return nil, err
	}
	l.appendLocked(c.Thread, out, recs)
	return out, nil
}

// prepare checks and encodes events for the thread, as they will be
// committed but for their seqs.
func prepare(ctx context.Context, threadID string, events []event.Event) ([]event.Event, []record, error) {
	if threadID == "" {
		return nil, nil, errors.New("memory: append: empty thread id")
	}
	if len(events) == 0 {
		return nil, nil, nil
	}
	now := time.Now()
	out := make([]event.Event, len(events))
	recs := make([]record, len(events))
	for i, e := range events {
		if e.Thread != "" && e.Thread != threadID {
			return nil, nil, fmt.Errorf("memory: append to thread %q: event %d belongs to thread %q", threadID, i, e.Thread)
		}
		data, err := event.EncodePayload(e.Payload)
		if err != nil {
			return nil, nil, fmt.Errorf("memory: append to thread %q: event %d: %w", threadID, i, err)
		}
		e.Thread = threadID
		if e.ID == "" {
			e.ID = event.NewID()
		}
		if e.Time.IsZero() {
			e.Time = now
		}
		e.Time = normalize(e.Time)
		// Return the payload as Read will, decoded from what is stored, so
		// live and replayed copies of an event are the same.
		typ := e.Type()
		if e.Payload, err = event.DecodePayload(typ, data); err != nil {
			return nil, nil, fmt.Errorf("memory: append to thread %q: event %d: %w", threadID, i, err)
		}
		out[i] = e
		e.Payload = nil
		recs[i] = record{event: e, typ: typ, data: data}
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	return out, recs, nil
}

// appendLocked numbers and keeps prepared events. l.mu is held.
func (l *Log) appendLocked(threadID string, out []event.Event, recs []record) {
	now := normalize(time.Now())
	t := l.threads[threadID]
	if t == nil {
		t = &thread{created: now}
		l.threads[threadID] = t
	}
	last := int64(len(t.records))
	for i := range recs {
		recs[i].event.Seq = last + int64(i) + 1
		out[i].Seq = recs[i].event.Seq
	}
	t.records = append(t.records, recs...)
	t.updated = now
}

// Read implements store.Log.
func (l *Log) Read(ctx context.Context, threadID string, after int64, limit int) ([]event.Event, error) {
	if limit < 1 {
		return nil, fmt.Errorf("memory: read %q: limit %d is below 1", threadID, limit)
	}
	recs, err := l.records(ctx, threadID)
	if err != nil {
		return nil, err
	}
	// Seqs are gapless from 1, so seq s sits at index s-1.
	start := min(max(after, 0), int64(len(recs)))
	end := min(start+int64(limit), int64(len(recs)))
	return decode(recs[start:end])
}

// LastSeq implements store.Log.
func (l *Log) LastSeq(ctx context.Context, threadID string) (int64, error) {
	recs, err := l.records(ctx, threadID)
	if err != nil {
		return 0, err
	}
	return int64(len(recs)), nil
}

// Threads implements store.Log.
func (l *Log) Threads(ctx context.Context, after string, limit int) ([]store.ThreadInfo, error) {
	if limit < 1 {
		return nil, fmt.Errorf("memory: threads: limit %d is below 1", limit)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return nil, store.ErrClosed
	}
	var out []store.ThreadInfo
	for id, t := range l.threads {
		if id > after {
			out = append(out, store.ThreadInfo{ID: id, LastSeq: int64(len(t.records)), Created: t.created, Updated: t.updated})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// History implements store.Log.
func (l *Log) History(ctx context.Context, threadID string) ([]event.Event, error) {
	recs, err := l.records(ctx, threadID)
	if err != nil {
		return nil, err
	}
	var hist []record
	for _, r := range recs {
		if slices.Contains(store.HistoryTypes, r.typ) {
			hist = append(hist, r)
		}
	}
	return decode(hist)
}

// Close implements store.Log. Appends hold the lock while they commit, so
// none is in flight once Close has it. It is safe to call more than once.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	l.threads = nil
	l.claims = nil
	l.queues = nil
	return nil
}

// usableLocked says why a call cannot use the log; l.mu is held.
func (l *Log) usableLocked(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if l.closed {
		return store.ErrClosed
	}
	return nil
}

func checkClaim(c store.RunClaim) error {
	if c.Thread == "" || c.Run == "" || c.Node == "" {
		return fmt.Errorf("memory: run claim: thread, run and node are required, got %+v", c)
	}
	return nil
}

// claimView returns c as read at time t.
func claimView(c store.RunClaim, t time.Time) store.RunClaim {
	c.Expired = c.Expires.Before(t)
	return c
}

// ClaimRun implements store.Runs.
func (l *Log) ClaimRun(ctx context.Context, c store.RunClaim, lease time.Duration) error {
	if err := checkClaim(c); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.claimLocked(ctx, c, lease)
}

// claimLocked is ClaimRun with l.mu held.
func (l *Log) claimLocked(ctx context.Context, c store.RunClaim, lease time.Duration) error {
	if err := l.usableLocked(ctx); err != nil {
		return err
	}
	if _, ok := l.claims[c.Thread]; ok {
		return store.ErrRunClaimed
	}
	t := normalize(time.Now())
	c.Since, c.Expires, c.Expired = t, t.Add(lease), false
	l.claims[c.Thread] = c
	return nil
}

// MoveRun implements store.Runs.
func (l *Log) MoveRun(ctx context.Context, c store.RunClaim, from string, lease time.Duration) error {
	if err := checkClaim(c); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(ctx); err != nil {
		return err
	}
	old, ok := l.claims[c.Thread]
	if !ok || old.Run != from || old.Node != c.Node {
		return store.ErrRunClaimed
	}
	t := normalize(time.Now())
	c.Since, c.Expires, c.Expired = t, t.Add(lease), false
	l.claims[c.Thread] = c
	return nil
}

// RenewRuns implements store.Runs.
func (l *Log) RenewRuns(ctx context.Context, node string, lease time.Duration) ([]store.RunClaim, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(ctx); err != nil {
		return nil, err
	}
	t := normalize(time.Now())
	var out []store.RunClaim
	for th, c := range l.claims {
		if c.Node == node {
			c.Expires = t.Add(lease)
			l.claims[th] = c
			out = append(out, claimView(c, t))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Thread < out[j].Thread })
	return out, nil
}

// TakeOverRun implements store.Runs.
func (l *Log) TakeOverRun(ctx context.Context, c store.RunClaim, node string, lease time.Duration) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(ctx); err != nil {
		return err
	}
	t := normalize(time.Now())
	old, ok := l.claims[c.Thread]
	if !ok || old.Run != c.Run || old.Node != c.Node || !old.Expires.Before(t) {
		return store.ErrRunClaimed
	}
	old.Node, old.Since, old.Expires = node, t, t.Add(lease)
	l.claims[c.Thread] = old
	return nil
}

// ReleaseRun implements store.Runs.
func (l *Log) ReleaseRun(ctx context.Context, c store.RunClaim) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(ctx); err != nil {
		return err
	}
	if old, ok := l.claims[c.Thread]; ok && old.Run == c.Run && old.Node == c.Node {
		delete(l.claims, c.Thread)
	}
	return nil
}

// ActiveRun implements store.Runs.
func (l *Log) ActiveRun(ctx context.Context, thread string) (store.RunClaim, bool, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.usableLocked(ctx); err != nil {
		return store.RunClaim{}, false, err
	}
	c, ok := l.claims[thread]
	return claimView(c, time.Now()), ok, nil
}

// RunClaims implements store.Runs.
func (l *Log) RunClaims(ctx context.Context) ([]store.RunClaim, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.usableLocked(ctx); err != nil {
		return nil, err
	}
	t := time.Now()
	out := make([]store.RunClaim, 0, len(l.claims))
	for _, c := range l.claims {
		out = append(out, claimView(c, t))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Thread < out[j].Thread })
	return out, nil
}

// EnqueueInput implements store.Runs.
func (l *Log) EnqueueInput(ctx context.Context, thread string, in store.QueuedInput) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(ctx); err != nil {
		return err
	}
	l.queues[thread] = append(l.queues[thread], in)
	return nil
}

// DequeueInput implements store.Runs.
func (l *Log) DequeueInput(ctx context.Context, thread string) (store.QueuedInput, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(ctx); err != nil {
		return store.QueuedInput{}, false, err
	}
	q := l.queues[thread]
	if len(q) == 0 {
		return store.QueuedInput{}, false, nil
	}
	in := q[0]
	if len(q) == 1 {
		delete(l.queues, thread)
	} else {
		l.queues[thread] = q[1:]
	}
	return in, true, nil
}

// DropQueue implements store.Runs.
func (l *Log) DropQueue(ctx context.Context, thread string) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(ctx); err != nil {
		return 0, err
	}
	n := len(l.queues[thread])
	delete(l.queues, thread)
	return n, nil
}

// records returns the thread's records as of now. Appends only ever add
// past the slice's length, so the returned slice stays valid without the
// lock.
func (l *Log) records(ctx context.Context, threadID string) ([]record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return nil, store.ErrClosed
	}
	t := l.threads[threadID]
	if t == nil {
		return nil, nil
	}
	return t.records[:len(t.records):len(t.records)], nil
}

func decode(recs []record) ([]event.Event, error) {
	if len(recs) == 0 {
		return nil, nil
	}
	out := make([]event.Event, len(recs))
	for i, r := range recs {
		p, err := event.DecodePayload(r.typ, r.data)
		if err != nil {
			return nil, fmt.Errorf("memory: thread %q seq %d: %w", r.event.Thread, r.event.Seq, err)
		}
		out[i] = r.event
		out[i].Payload = p
	}
	return out, nil
}

// normalize returns t as the durable stores keep it: UTC, to the
// microsecond, without a monotonic clock reading.
func normalize(t time.Time) time.Time {
	return t.UTC().Truncate(time.Microsecond)
}

// QueueLen implements store.Runs.
func (l *Log) QueueLen(ctx context.Context, thread string) (int, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.usableLocked(ctx); err != nil {
		return 0, err
	}
	return len(l.queues[thread]), nil
}

// OwnThread implements store.Owners.
func (l *Log) OwnThread(ctx context.Context, thread, principal string) (string, error) {
	if thread == "" || principal == "" {
		return "", errors.New("memory: own thread: thread and principal are required")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(ctx); err != nil {
		return "", err
	}
	if owner, ok := l.owners[thread]; ok {
		return owner, nil
	}
	l.owners[thread] = principal
	return principal, nil
}

// ThreadOwner implements store.Owners.
func (l *Log) ThreadOwner(ctx context.Context, thread string) (string, bool, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.usableLocked(ctx); err != nil {
		return "", false, err
	}
	owner, ok := l.owners[thread]
	return owner, ok, nil
}

// Spent implements store.Spending.
func (l *Log) Spent(ctx context.Context, principal string, since ...time.Time) ([]store.Spend, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.usableLocked(ctx); err != nil {
		return nil, err
	}
	out := make([]store.Spend, len(since))
	for id, owner := range l.owners {
		t, ok := l.threads[id]
		if owner != principal || !ok {
			continue
		}
		for _, r := range t.records {
			if r.typ != event.TypeUsage {
				continue
			}
			p, err := event.DecodePayload(r.typ, r.data)
			if err != nil {
				return nil, fmt.Errorf("memory: thread %q seq %d: %w", id, r.event.Seq, err)
			}
			u := p.(event.Usage)
			for i, from := range since {
				if !r.event.Time.Before(from) {
					out[i].Tokens += u.TotalTokens
					out[i].Cost += u.Cost
				}
			}
		}
	}
	return out, nil
}
