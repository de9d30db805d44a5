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
}

var _ store.Log = (*Log)(nil)

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
	return &Log{threads: map[string]*thread{}}
}

// Append implements store.Log. Events are checked and encoded before the
// lock is taken, so a bad event commits nothing.
func (l *Log) Append(ctx context.Context, threadID string, events ...event.Event) ([]event.Event, error) {
	if threadID == "" {
		return nil, errors.New("memory: append: empty thread id")
	}
	if len(events) == 0 {
		return nil, nil
	}
	now := time.Now()
	out := make([]event.Event, len(events))
	recs := make([]record, len(events))
	for i, e := range events {
		if e.Thread != "" && e.Thread != threadID {
			return nil, fmt.Errorf("memory: append to thread %q: event %d belongs to thread %q", threadID, i, e.Thread)
		}
		data, err := event.EncodePayload(e.Payload)
		if err != nil {
			return nil, fmt.Errorf("memory: append to thread %q: event %d: %w", threadID, i, err)
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
			return nil, fmt.Errorf("memory: append to thread %q: event %d: %w", threadID, i, err)
		}
		out[i] = e
		e.Payload = nil
		recs[i] = record{event: e, typ: typ, data: data}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, store.ErrClosed
	}
	t := l.threads[threadID]
	if t == nil {
		t = &thread{created: normalize(now)}
		l.threads[threadID] = t
	}
	last := int64(len(t.records))
	for i := range recs {
		recs[i].event.Seq = last + int64(i) + 1
		out[i].Seq = recs[i].event.Seq
	}
	t.records = append(t.records, recs...)
	t.updated = normalize(now)
	return out, nil
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
	return nil
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
