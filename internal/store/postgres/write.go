package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentwire/agentwire/internal/store/internal/groupcommit"
)

// A batch is committed as one pipeline of two statements and one Sync: one
// round trip, and one implicit transaction (nothing of it commits unless all
// of it does). Under READ COMMITTED each statement takes its own snapshot
// when it starts, which is what makes the first one's locks work for the
// second:
//
//  1. lockThreads takes a transaction-scoped advisory lock on every thread
//     of the batch (lockKeys), in ascending key order so two batches cannot
//     deadlock. Another server appending to one of these threads waits here
//     until this transaction has committed or rolled back; PostgreSQL makes
//     a transaction's commit visible before it releases its locks, so the
//     next holder's second statement sees every event committed before it.
//  2. insertEvents or appendEvents numbers the events after each thread's
//     last seq and inserts them.
//
// No row is updated: a thread costs an advisory lock (shared memory, no
// WAL) and, unless the writer knows its last seq, one probe of the events'
// primary key.
const lockThreads = `
SELECT CASE WHEN l.shared THEN pg_advisory_xact_lock_shared(l.key) ELSE pg_advisory_xact_lock(l.key) END
FROM unnest($1::int8[], $2::bool[]) AS l (key, shared)`

// insertEvents inserts events numbered by the writer from the last seqs it
// knows (seqCache): $1..$7 the events' columns. It inserts nothing unless
// the server is still the one those seqs were learnt from ($8, see
// seqCache), so that flush can tell it must look them up again.
const insertEvents = `
INSERT INTO events (thread, seq, id, run, type, time, data)
SELECT b.thread, b.seq, b.id, b.run, b.type, b.time, b.data::json
FROM unnest($1::text[], $2::int8[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::text[])
	AS b (thread, seq, id, run, type, time, data)
WHERE pg_postmaster_start_time() = $8`

// appendEvents numbers and inserts the events of a batch with threads whose
// last seq the writer does not know: it reads those from the events'
// primary key (max(seq), one index probe each), and inserts a threads row
// for threads that had no events. $1 are the batch's distinct threads and
// $2 their last seqs where the writer knows them (-1 where not), trusted
// only if the server is still the one they were learnt from ($10); per
// event, in batch order, $3 its thread's index in $1 (from 1) and $4 its
// position among that thread's events in the batch (from 1), then $5..$9
// its columns; $11 the creation time of new threads. It returns each
// thread's last seq before the batch, from which flush numbers the events
// the same way, and the server's start time.
const appendEvents = `
WITH t AS MATERIALIZED (
	SELECT t.id, t.i,
		CASE WHEN t.known >= 0 AND pg_postmaster_start_time() = $10 THEN t.known
		ELSE coalesce((SELECT max(e.seq) FROM events e WHERE e.thread = t.id), 0) END AS last
	FROM unnest($1::text[], $2::int8[]) WITH ORDINALITY AS t (id, known, i)
), created AS (
	INSERT INTO threads (id, created)
	SELECT id, $11 FROM t WHERE last = 0
	ON CONFLICT (id) DO NOTHING
), inserted AS (
	INSERT INTO events (thread, seq, id, run, type, time, data)
	SELECT t.id, t.last + b.pos, b.id, b.run, b.type, b.time, b.data::json
	FROM unnest($3::int8[], $4::int8[], $5::text[], $6::text[], $7::text[], $8::timestamptz[], $9::text[])
		AS b (ti, pos, id, run, type, time, data)
	JOIN t ON t.i = b.ti
)
SELECT last, pg_postmaster_start_time() FROM t ORDER BY i`

// seqCache holds the last seq of threads this store committed to, so a
// batch of known threads needs no lookup. Only flush uses it, on the
// writer goroutine. A lookup is not cheap: a thread's last event is mostly
// one this store committed a moment ago, and the first read of a row after
// its commit checks its transaction's status and sets the row's hint bits;
// measured with batches of 100 threads, the lookups took about half as long
// as inserting the batch.
//
// An entry can fall behind, when another server appends to the thread: the
// insert then collides with the event that server committed under the
// events' primary key, nothing of the batch commits, and flush starts over
// with lookups. It can never run ahead of the table, since seqs are only
// ever added, as long as the database is the one it was learnt from: a
// failover to a replica that lacks the last commits, or a restore from a
// backup, would lose events the cache counts. So entries are trusted only
// while the server's start time (pg_postmaster_start_time(), which every
// such event changes) is server, and the statements check that themselves.
type seqCache struct {
	server time.Time
	last   map[string]int64
}

// known returns the last seqs of threads (-1 for those not known), the
// server they were learnt from, and whether all of them are known.
func (c *seqCache) known(threads []string) (last []int64, server time.Time, all bool) {
	last = make([]int64, len(threads))
	all = !c.server.IsZero()
	for i, th := range threads {
		seq, ok := c.last[th]
		if !ok || c.server.IsZero() {
			seq, all = -1, false
		}
		last[i] = seq
	}
	return last, c.server, all
}

// learn records threads' last seqs, committed to server.
func (c *seqCache) learn(server time.Time, threads []string, last []int64) {
	if !server.Equal(c.server) || len(c.last)+len(threads) > maxCachedThreads {
		clear(c.last)
		c.server = server
	}
	for i, th := range threads {
		c.last[th] = last[i]
	}
}

// forget drops every entry.
func (c *seqCache) forget() {
	clear(c.last)
	c.server = time.Time{}
}

// maxCachedThreads bounds seqCache; past it the cache starts over
// (threads then cost one lookup on their next append).
const maxCachedThreads = 100_000

// errStale reports a batch numbered from last seqs that were out of date;
// nothing of it committed.
var errStale = errors.New("postgres: cached last seqs are out of date")

// defaultThreadLocks is how many threads a batch locks one by one. A batch
// of more threads takes the store-wide append lock exclusively instead
// (lockKeys), so that no transaction holds more advisory locks than
// PostgreSQL's shared lock table comfortably has room for
// (max_locks_per_transaction, 64 by default, times the connections).
const defaultThreadLocks = 256

// lockKeys returns the advisory locks a batch of threads takes, in the
// order it takes them, and whether each is taken shared. Every batch takes
// the store-wide append key first: shared, followed by each thread's key in
// ascending order, or, for a batch of more than s.threadLocks threads,
// exclusive and alone, which excludes every other batch of every server.
func (s *Store) lockKeys(threads []string) (keys []int64, shared []bool) {
	if len(threads) > s.threadLocks {
		return []int64{appendKey(s.schema)}, []bool{false}
	}
	keys = make([]int64, 0, len(threads)+1)
	for _, th := range threads {
		keys = append(keys, threadKey(s.schema, th))
	}
	slices.Sort(keys)
	keys = slices.Compact(keys) // two threads may share a key; lock it once
	keys = slices.Insert(keys, 0, appendKey(s.schema))
	shared = make([]bool, len(keys))
	shared[0] = true
	return keys, shared
}

// threadKey is the advisory lock key of thread's appends in schema: a 64-bit
// FNV-1a hash, the same in every server. Threads whose keys collide only
// wait for each other.
func threadKey(schema, thread string) int64 {
	return lockHash("agentwire/store/thread", schema, thread)
}

// appendKey is the advisory lock key every append batch in schema takes
// first (see lockKeys).
func appendKey(schema string) int64 {
	return lockHash("agentwire/store/append", schema, "")
}

func lockHash(parts ...string) int64 {
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	for _, p := range parts {
		for i := 0; i < len(p); i++ {
			h ^= uint64(p[i])
			h *= prime
		}
		h *= prime // a zero byte between parts: ("ab", "") != ("a", "b")
	}
	return int64(h)
}

// flush commits one batch and numbers its events.
func (s *Store) flush(ctx context.Context, batch []*groupcommit.Append) error {
	s.staleMu.Lock()
	for th := range s.stale {
		delete(s.seqs.last, th)
	}
	clear(s.stale)
	s.staleMu.Unlock()
	n := 0
	index := make(map[string]int64, len(batch)) // thread -> its index in threads, from 1
	var threads []string
	for _, a := range batch {
		if a.Write != nil {
			return errors.New("postgres: writes other than appends are not batched")
		}
		n += len(a.Events)
		if _, ok := index[a.Thread]; !ok {
			threads = append(threads, a.Thread)
			index[a.Thread] = int64(len(threads))
		}
	}
	b := &appendBatch{
		threads: threads,
		count:   make([]int64, len(threads)),
		tis:     make([]int64, 0, n),
		pos:     make([]int64, 0, n),
		ids:     make([]string, 0, n),
		runs:    make([]string, 0, n),
		types:   make([]string, 0, n),
		times:   make([]time.Time, 0, n),
		data:    make([][]byte, 0, n),
	}
	for _, a := range batch {
		ti := index[a.Thread]
		for i, e := range a.Events {
			b.count[ti-1]++
			b.tis = append(b.tis, ti)
			b.pos = append(b.pos, b.count[ti-1])
			b.ids = append(b.ids, e.ID)
			b.runs = append(b.runs, e.Run)
			b.types = append(b.types, string(e.Type()))
			b.times = append(b.times, e.Time)
			b.data = append(b.data, a.Data[i])
		}
	}
	b.keys, b.shared = s.lockKeys(threads)

	var (
		last   []int64
		server time.Time
	)
	for attempt := 1; ; attempt++ {
		var err error
		last, server, err = s.commitBatch(ctx, b)
		if err == nil {
			break
		}
		// Nothing of the batch committed, or it is not known whether it
		// did: the cache may be wrong either way.
		s.seqs.forget()
		stale := errors.Is(err, errStale)
		if attempt == maxAttempts || !(stale || retryable(err)) {
			return err
		}
		if stale {
			s.log.Debug("postgres: retrying append batch with seqs looked up", "attempt", attempt, "err", err)
		} else {
			s.log.Warn("postgres: retrying append batch", "attempt", attempt, "err", err)
		}
	}
	next := make([]int64, len(threads))
	for i := range threads {
		next[i] = last[i] + b.count[i]
	}
	s.seqs.learn(server, threads, next)
	for _, a := range batch {
		ti := index[a.Thread] - 1
		for i := range a.Events {
			last[ti]++
			a.Events[i].Seq = last[ti]
		}
	}
	return nil
}

// appendBatch is a batch as flush sends it: its distinct threads, and its
// events as columns in batch order.
type appendBatch struct {
	threads []string
	count   []int64 // events of each thread
	keys    []int64 // advisory locks (lockKeys)
	shared  []bool

	tis, pos         []int64 // each event's thread (index in threads, from 1), and position in it (from 1)
	ids, runs, types []string
	times            []time.Time
	data             [][]byte
}

// commitBatch commits b in one round trip and returns each thread's last
// seq before it, and the server's start time. With every thread's last seq
// in the cache, the events are numbered here (insertEvents); otherwise the
// database numbers them (appendEvents).
func (s *Store) commitBatch(ctx context.Context, b *appendBatch) (last []int64, server time.Time, err error) {
	known, server, all := s.seqs.known(b.threads)
	q := &pgx.Batch{}
	q.Queue(lockThreads, b.keys, b.shared)
	if all {
		evThreads := make([]string, len(b.tis))
		seqs := make([]int64, len(b.tis))
		for i, ti := range b.tis {
			evThreads[i] = b.threads[ti-1]
			seqs[i] = known[ti-1] + b.pos[i]
		}
		q.Queue(insertEvents, evThreads, seqs, b.ids, b.runs, b.types, b.times, b.data, server)
	} else {
		q.Queue(appendEvents, b.threads, known, b.tis, b.pos, b.ids, b.runs, b.types, b.times, b.data,
			server, time.Now())
	}
	br := s.pool.SendBatch(ctx, q)
	_, err = br.Exec()
	if err == nil {
		if all {
			var tag pgconn.CommandTag
			if tag, err = br.Exec(); err == nil && tag.RowsAffected() != int64(len(b.tis)) {
				// Another server than the cache's: nothing was inserted.
				err = errStale
			}
			last = known
		} else {
			var rows pgx.Rows
			if rows, err = br.Query(); err == nil {
				var seq int64
				_, err = pgx.ForEachRow(rows, []any{&seq, &server}, func() error {
					last = append(last, seq)
					return nil
				})
			}
		}
	}
	// Close reads up to the Sync, which commits: only then is the batch
	// durable, and a failed commit is reported here.
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" { // unique_violation
		// A last seq the cache knew was behind: another server appended.
		err = fmt.Errorf("%w: %w", errStale, err)
	}
	if err == nil && len(last) != len(b.threads) {
		err = fmt.Errorf("read last seqs of %d of %d threads", len(last), len(b.threads))
	}
	return last, server, err
}

// maxAttempts bounds retries of a batch that lost a deadlock or
// serialization race (neither should happen given the lock order; this is
// the safety net). Both abort the transaction, so nothing of it committed.
const maxAttempts = 3

func retryable(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case "40001", "40P01": // serialization_failure, deadlock_detected
		return true
	}
	return false
}
