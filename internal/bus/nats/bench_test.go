package nats_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentwire/agentwire/internal/bus"
	busnats "github.com/agentwire/agentwire/internal/bus/nats"
	"github.com/agentwire/agentwire/internal/event"
)

// benchURL is CI's NATS when it is set, else an embedded server.
func benchURL(b *testing.B) string {
	if u := os.Getenv("AGENTWIRE_TEST_NATS_URL"); u != "" {
		return u
	}
	return startEmbedded(b).url()
}

// BenchmarkFanOut delivers each published event to 1,000 subscribers of
// one thread, all on one node, or spread over three nodes (three
// connections): events delivered per second, and the three-node run as a
// ratio of the one-node run (docs/BENCHMARKS.md).
func BenchmarkFanOut(b *testing.B) {
	const subscribers, events = 1000, 200
	url := benchURL(b)
	rates := map[int]float64{}
	for _, nodes := range []int{1, 3} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			prefix := "bench-" + event.NewID()
			buses := make([]*busnats.Bus, nodes)
			for i := range buses {
				bb, err := busnats.Open(context.Background(), url, busnats.Options{Prefix: prefix})
				if err != nil {
					b.Fatal(err)
				}
				defer bb.Close()
				buses[i] = bb
			}
			pub, err := busnats.Open(context.Background(), url, busnats.Options{Prefix: prefix})
			if err != nil {
				b.Fatal(err)
			}
			defer pub.Close()
			var delivered int64
			var elapsed time.Duration
			for b.Loop() {
				thread := "fan-" + event.NewID()
				subs := make([]bus.Subscription, subscribers)
				for i := range subs {
					s, err := buses[i%nodes].Subscribe(context.Background(), thread, events)
					if err != nil {
						b.Fatal(err)
					}
					subs[i] = s
				}
				var wg sync.WaitGroup
				start := time.Now()
				for _, s := range subs {
					wg.Go(func() {
						defer s.Close()
						for range events {
							if _, err := s.Next(context.Background()); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				for i := range events {
					e := event.New(thread, "r", event.MessageDelta{MessageID: "m", Text: "token"})
					e.Seq = int64(i + 1)
					if err := pub.Publish(context.Background(), thread, []event.Event{e}); err != nil {
						b.Fatal(err)
					}
				}
				wg.Wait()
				elapsed += time.Since(start)
				delivered += subscribers * events
			}
			rate := float64(delivered) / elapsed.Seconds()
			rates[nodes] = rate
			b.ReportMetric(rate, "deliveries/s")
		})
	}
	if rates[1] > 0 && rates[3] > 0 {
		b.Logf("three nodes / one node: %.2fx deliveries per second", rates[3]/rates[1])
	}
}

// BenchmarkCrossNodeLatency measures the time from Publish to a
// subscriber's Next for a subscriber on the publishing node's connection
// and for one on another node's: p50 and p99 of each.
func BenchmarkCrossNodeLatency(b *testing.B) {
	url := benchURL(b)
	prefix := "lat-" + event.NewID()
	a, err := busnats.Open(context.Background(), url, busnats.Options{Prefix: prefix})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	other, err := busnats.Open(context.Background(), url, busnats.Options{Prefix: prefix})
	if err != nil {
		b.Fatal(err)
	}
	defer other.Close()
	p50 := map[string]time.Duration{}
	for _, where := range []string{"same-node", "cross-node"} {
		b.Run(where, func(b *testing.B) {
			sub := a
			if where == "cross-node" {
				sub = other
			}
			thread := "lat-" + event.NewID()
			s, err := sub.Subscribe(context.Background(), thread, 16)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			var lat []time.Duration
			seq := int64(0)
			for b.Loop() {
				seq++
				e := event.New(thread, "r", event.MessageDelta{MessageID: "m", Text: "token"})
				e.Seq = seq
				start := time.Now()
				if err := a.Publish(context.Background(), thread, []event.Event{e}); err != nil {
					b.Fatal(err)
				}
				if _, err := s.Next(context.Background()); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			slices.Sort(lat)
			q := func(f float64) time.Duration { return lat[int(f*float64(len(lat)-1))] }
			p50[where] = q(0.5)
			b.ReportMetric(float64(q(0.5).Microseconds()), "p50-µs")
			b.ReportMetric(float64(q(0.99).Microseconds()), "p99-µs")
		})
	}
	if p50["same-node"] > 0 {
		b.Logf("cross-node / same-node p50: %.2fx", float64(p50["cross-node"])/float64(p50["same-node"]))
	}
}
