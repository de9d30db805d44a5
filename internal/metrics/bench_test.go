package metrics

import "testing"

// BenchmarkFrameSent measures counting one frame sent, from as many
// goroutines as there are processors (a thread's fan-out writes from one
// writer per socket). The baseline looks the protocol's counter up by its
// label for each frame, as the connections did before they kept their
// Frames; Frames.Sent adds to the counter looked up once.
func BenchmarkFrameSent(b *testing.B) {
	m := New()
	b.Run("baseline=lookup", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				m.framesOut.WithLabelValues("threads").Inc()
			}
		})
	})
	b.Run("frames", func(b *testing.B) {
		f := m.Frames("threads")
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				f.Sent()
			}
		})
	})
}
