package wsconn

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/coder/websocket"
)

// BenchmarkIdleSockets measures the memory an open, idle socket holds:
// 1,000 sockets are opened and the live heap and goroutine stacks compared
// before and after. The baseline serves the same sockets with a bare
// coder/websocket read loop, so the ratio is what wsconn's writer and
// queue add. Client and server share the process; both variants carry the
// same client cost.
func BenchmarkIdleSockets(b *testing.B) {
	const sockets = 1000
	bare := func(w http.ResponseWriter, r *http.Request, ready *sync.WaitGroup) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		ready.Done()
		for {
			if _, _, err := ws.Read(r.Context()); err != nil {
				return
			}
		}
	}
	reg := NewRegistry()
	viaWsconn := func(w http.ResponseWriter, r *http.Request, ready *sync.WaitGroup) {
		Serve(w, r, reg, Options{}, func(ctx context.Context, c *Conn) error {
			ready.Done()
			for {
				if _, err := c.Read(ctx); err != nil {
					return err
				}
			}
		})
	}
	for _, v := range []struct {
		name  string
		serve func(http.ResponseWriter, *http.Request, *sync.WaitGroup)
	}{{"baseline=bare", bare}, {"wsconn", viaWsconn}} {
		b.Run(v.name, func(b *testing.B) {
			var perSocket float64
			for b.Loop() {
				perSocket = idleSocketBytes(b, sockets, v.serve)
			}
			b.ReportMetric(perSocket, "B/socket")
		})
	}
}

func idleSocketBytes(b *testing.B, n int, serve func(http.ResponseWriter, *http.Request, *sync.WaitGroup)) float64 {
	var ready sync.WaitGroup
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { serve(w, r, &ready) }))
	defer srv.Close()
	url := "ws" + strings.TrimPrefix(srv.URL, "http")

	before := liveBytes()
	clients := make([]*websocket.Conn, 0, n)
	defer func() {
		for _, c := range clients {
			c.CloseNow()
		}
	}()
	ready.Add(n)
	for range n {
		c, _, err := websocket.Dial(context.Background(), url, nil)
		if err != nil {
			b.Fatal(err)
		}
		clients = append(clients, c)
	}
	ready.Wait()
	return float64(liveBytes()-before) / float64(n)
}

// liveBytes is the heap in use plus goroutine stacks, after a collection.
func liveBytes() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse + m.StackInuse)
}
