package storetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/store"
)

// The benchmarks compare a store with the plainest use of the same database
// measured in the same run, and report the ratio: absolute figures on a
// shared 2-core machine say little, ratios say what the store costs.

const (
	// BenchThreads is how many threads append at once in BenchAppend.
	BenchThreads = 100
	// BenchPayloadSize is the encoded size of each benchmark payload.
	BenchPayloadSize = 200
	// RawBatch is how many rows the raw baseline inserts per transaction:
	// one per appending thread, the batch group commit forms under load.
	RawBatch = BenchThreads
)

// Row is one event as a plain table holds it, for the raw baselines.
type Row struct {
	Thread string
	Seq    int64
	ID     string
	Run    string
	Type   string
	Time   time.Time
	Data   []byte
}

// BenchPayload returns a message delta whose encoding is exactly
// BenchPayloadSize bytes.
func BenchPayload() event.Payload {
	p := event.MessageDelta{MessageID: event.NewID()}
	data, err := event.EncodePayload(p)
	if err != nil {
		panic(err)
	}
	p.Text = strings.Repeat("x", BenchPayloadSize-len(data))
	return p
}

// appendRounds is how many alternating store and raw phases BenchAppend
// runs, so load from elsewhere on the machine lands on both sides alike.
const appendRounds = 10

// BenchAppend measures committed events per second with BenchThreads
// threads appending one event at a time concurrently, and inserts the same
// number of rows with insertRaw, RawBatch rows per call (one transaction),
// into a plain table of the same shape; the two alternate in appendRounds
// rounds. It reports events/s of both, the ratio store/raw ("x-raw", higher
// is better, goal >= 0.8) and the append latency p50 and p99 under that
// load.
func BenchAppend(b *testing.B, l store.Log, insertRaw func(ctx context.Context, rows []Row) error) {
	ctx := b.Context()
	payload := BenchPayload()
	data, err := event.EncodePayload(payload)
	if err != nil {
		b.Fatal(err)
	}
	rounds := min(appendRounds, max(1, b.N/BenchThreads))
	perRound := max(1, b.N/(BenchThreads*rounds)) // appends per thread per round
	n := perRound * BenchThreads * rounds
	run := event.NewID() // threads are new in every call of the benchmark
	lat := make([][]time.Duration, BenchThreads)
	var storeTime, rawTime time.Duration

	b.ResetTimer()
	for round := range rounds {
		b.StartTimer()
		start := time.Now()
		errs := make(chan error, BenchThreads)
		var wg sync.WaitGroup
		for w := range BenchThreads {
			thread := fmt.Sprintf("bench-%s-%03d", run, w)
			wg.Go(func() {
				for range perRound {
					t0 := time.Now()
					if _, err := l.Append(ctx, thread, event.Event{Run: run, Payload: payload}); err != nil {
						errs <- err
						return
					}
					lat[w] = append(lat[w], time.Since(t0))
				}
			})
		}
		wg.Wait()
		storeTime += time.Since(start)
		b.StopTimer()
		close(errs)
		if err := <-errs; err != nil {
			b.Fatal(err)
		}

		rows := make([]Row, 0, perRound*BenchThreads)
		now := time.Now().UTC().Truncate(time.Microsecond)
		for s := range perRound {
			for w := range BenchThreads {
				rows = append(rows, Row{Thread: fmt.Sprintf("raw-%s-%03d", run, w), Seq: int64(round*perRound + s + 1),
					ID: event.NewID(), Run: run, Type: string(payload.EventType()), Time: now, Data: data})
			}
		}
		start = time.Now()
		for batch := range slices.Chunk(rows, RawBatch) {
			if err := insertRaw(ctx, batch); err != nil {
				b.Fatal(err)
			}
		}
		rawTime += time.Since(start)
	}

	all := slices.Concat(lat...)
	slices.Sort(all)
	b.ReportMetric(float64(n)/storeTime.Seconds(), "events/s")
	b.ReportMetric(float64(n)/rawTime.Seconds(), "raw-events/s")
	b.ReportMetric(rawTime.Seconds()/storeTime.Seconds(), "x-raw")
	b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
}

// ReplayEvents is how many events BenchReplay reads.
const ReplayEvents = 10_000

// ReplayPage is the page size BenchReplay reads with, as a subscriber
// catching up would.
const ReplayPage = 1_000

// RawReader reads thread's first limit events with one plain SELECT. It
// calls row with each row's type and payload bytes (valid only during the
// call) and returns the number of rows.
type RawReader func(ctx context.Context, thread string, limit int, row func(typ string, data []byte) error) (int, error)

// BenchReplay reads thread's first ReplayEvents events through l, in pages
// of ReplayPage, and the same rows with readRaw (one plain SELECT, columns
// scanned, payloads not decoded), alternating, and reports the ratio of
// their times ("x-raw", lower is better, goal <= 1.5). It also times the
// raw SELECT followed by event.DecodePayload of each row, the floor for any
// store that returns typed events, and reports the store against that
// ("x-raw-decoded").
func BenchReplay(b *testing.B, l store.Log, thread string, readRaw RawReader) {
	ctx := b.Context()
	var storeTime, rawTime, decodedTime time.Duration
	skip := func(string, []byte) error { return nil }
	decode := func(typ string, data []byte) error {
		_, err := event.DecodePayload(event.Type(typ), data)
		return err
	}
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		read := 0
		for read < ReplayEvents {
			evs, err := l.Read(ctx, thread, int64(read), min(ReplayPage, ReplayEvents-read))
			if err != nil {
				b.Fatal(err)
			}
			if len(evs) == 0 {
				b.Fatalf("thread %s has only %d events", thread, read)
			}
			read += len(evs)
		}
		storeTime += time.Since(start)

		b.StopTimer()
		for _, m := range []struct {
			row func(string, []byte) error
			sum *time.Duration
		}{{skip, &rawTime}, {decode, &decodedTime}} {
			start = time.Now()
			got, err := readRaw(ctx, thread, ReplayEvents, m.row)
			if err != nil {
				b.Fatal(err)
			}
			if got != ReplayEvents {
				b.Fatalf("raw read %d rows, want %d", got, ReplayEvents)
			}
			*m.sum += time.Since(start)
		}
		b.StartTimer()
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(b.N) }
	b.ReportMetric(ms(storeTime), "store-ms")
	b.ReportMetric(ms(rawTime), "raw-ms")
	b.ReportMetric(ms(decodedTime), "raw-decoded-ms")
	b.ReportMetric(storeTime.Seconds()/rawTime.Seconds(), "x-raw")
	b.ReportMetric(storeTime.Seconds()/decodedTime.Seconds(), "x-raw-decoded")
}

// Big log dimensions for BenchReplay: BigThreads threads of ReplayEvents
// events each, a million events in all.
const (
	BigThreads = 100
	bigChunk   = 100
)

// BigThread names the i-th thread of the big log.
func BigThread(i int) string { return fmt.Sprintf("big-%03d", i) }

// FillBig appends the big log to l: BigThreads threads of ReplayEvents
// events, appended concurrently in chunks so the threads' events interleave
// in the log as a busy server's would.
func FillBig(ctx context.Context, l store.Log) error {
	payload := BenchPayload()
	errs := make(chan error, BigThreads)
	var wg sync.WaitGroup
	for w := range BigThreads {
		wg.Go(func() {
			in := make([]event.Event, bigChunk)
			for i := range in {
				in[i] = event.Event{Payload: payload}
			}
			for range ReplayEvents / bigChunk {
				if _, err := l.Append(ctx, BigThread(w), in...); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// BenchSpent measures Spent, what a budget check reads before each model
// call, for a principal with threads threads of 100 events each (10 of
// them usage), among another principal's as many: against a baseline of
// ThreadOwner, one point read of the same store, measured in the same run.
// It reports ns/op of Spent and its ratio to the baseline (x-point-read).
func BenchSpent(b *testing.B, st store.Store, threads int) {
	ctx := b.Context()
	now := time.Now()
	for _, who := range []string{"p", "q"} {
		for i := range threads {
			th := fmt.Sprintf("spent-%s-%05d", who, i)
			if _, err := st.OwnThread(ctx, th, who); err != nil {
				b.Fatal(err)
			}
			evs := make([]event.Event, 0, 100)
			for j := range 100 {
				var p event.Payload = BenchPayload()
				if j%10 == 9 {
					p = event.Usage{PromptTokens: 900, CompletionTokens: 100, TotalTokens: 1000, Cost: 0.001, Model: "m"}
				}
				evs = append(evs, event.Event{Run: "r", Time: now.Add(-time.Duration(100-j) * time.Minute), Payload: p})
			}
			if _, err := st.Append(ctx, th, evs...); err != nil {
				b.Fatal(err)
			}
		}
	}
	since := []time.Time{now.Add(-24 * time.Hour), now.Add(-time.Hour)}
	want := int64(threads) * 10 * 1000
	measure := func(op func() error) time.Duration {
		start := time.Now()
		for range b.N {
			if err := op(); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}
	b.ResetTimer()
	base := measure(func() error {
		_, _, err := st.ThreadOwner(ctx, "spent-p-00000")
		return err
	})
	spent := measure(func() error {
		s, err := st.Spent(ctx, "p", since...)
		if err == nil && s[0].Tokens != want {
			err = fmt.Errorf("spent %d tokens, want %d", s[0].Tokens, want)
		}
		return err
	})
	b.StopTimer()
	b.ReportMetric(float64(spent.Nanoseconds())/float64(b.N), "ns/spent")
	b.ReportMetric(float64(spent)/float64(base), "x-point-read")
}
