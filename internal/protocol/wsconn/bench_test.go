package wsconn

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

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

// BenchmarkFanOutFrames measures one small frame sent to each of 100
// sockets whose clients read at once, so each socket's writer starts,
// writes one frame and goes idle again, as in a thread's fan-out of one
// token at a time. An op is one frame delivered to every socket. The
// baseline is a naive relay's socket: a goroutine per socket writing
// each frame with coder/websocket and the connection's context.
func BenchmarkFanOutFrames(b *testing.B) {
	const sockets = 100
	frame := []byte(`{"type":"agent_message","content":"token"}`)
	bare := func(b *testing.B) (func(), func()) {
		feeds := make([]chan struct{}, 0, sockets)
		var mu sync.Mutex
		var writers sync.WaitGroup
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ws, err := websocket.Accept(w, r, nil)
			if err != nil {
				return
			}
			feed := make(chan struct{}, 1024)
			mu.Lock()
			feeds = append(feeds, feed)
			mu.Unlock()
			writers.Go(func() {
				for range feed {
					if err := ws.Write(r.Context(), websocket.MessageText, frame); err != nil {
						return
					}
				}
			})
			for {
				if _, _, err := ws.Read(r.Context()); err != nil {
					return
				}
			}
		}))
		send := func() {
			mu.Lock()
			defer mu.Unlock()
			for _, f := range feeds {
				f <- struct{}{}
			}
		}
		stop := func() {
			mu.Lock()
			for _, f := range feeds {
				close(f)
			}
			mu.Unlock()
			writers.Wait()
			srv.CloseClientConnections()
			srv.Close()
		}
		registered := func() int {
			mu.Lock()
			defer mu.Unlock()
			return len(feeds)
		}
		return fanOutClients(b, srv, sockets, registered, send, stop)
	}
	viaWsconn := func(b *testing.B) (func(), func()) {
		reg := NewRegistry()
		var mu sync.Mutex
		var conns []*Conn
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			Serve(w, r, reg, Options{}, func(ctx context.Context, c *Conn) error {
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
				for {
					if _, err := c.Read(ctx); err != nil {
						return err
					}
				}
			})
		}))
		send := func() {
			mu.Lock()
			defer mu.Unlock()
			for _, c := range conns {
				c.Send(frame)
			}
		}
		stop := func() {
			_ = reg.Shutdown(context.Background())
			srv.Close()
		}
		registered := func() int {
			mu.Lock()
			defer mu.Unlock()
			return len(conns)
		}
		return fanOutClients(b, srv, sockets, registered, send, stop)
	}
	for _, v := range []struct {
		name  string
		setup func(*testing.B) (func(), func())
	}{{"baseline=bare", bare}, {"wsconn", viaWsconn}} {
		b.Run(v.name, func(b *testing.B) {
			deliver, stop := v.setup(b)
			defer stop()
			b.ReportAllocs()
			for b.Loop() {
				deliver()
			}
		})
	}
}

// fanOutClients dials n clients of srv that read frames and returns
// deliver, once registered reports all n sockets, which sends one frame to every socket with send and waits
// until every client has read it, and stop, which ends the clients and
// then the server with srvStop.
func fanOutClients(b *testing.B, srv *httptest.Server, n int, registered func() int, send, srvStop func()) (deliver, stop func()) {
	url := "ws" + strings.TrimPrefix(srv.URL, "http")
	got := make(chan struct{}, n)
	var readers sync.WaitGroup
	clients := make([]*websocket.Conn, 0, n)
	for range n {
		c, _, err := websocket.Dial(context.Background(), url, nil)
		if err != nil {
			b.Fatal(err)
		}
		clients = append(clients, c)
		readers.Go(func() {
			for {
				if _, _, err := c.Read(context.Background()); err != nil {
					return
				}
				got <- struct{}{}
			}
		})
	}
	// The server registers each socket after the client's dial returns.
	for deadline := time.Now().Add(10 * time.Second); registered() < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d sockets registered", registered(), n)
		}
	}
	deliver = func() {
		send()
		for range n {
			<-got
		}
	}
	stop = func() {
		for _, c := range clients {
			c.CloseNow()
		}
		readers.Wait()
		srvStop()
	}
	return deliver, stop
}
