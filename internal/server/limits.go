package server

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// headerTimeout bounds how long a connection may take to send a request's
// headers: a client that has not finished its request holds nothing for
// longer.
const headerTimeout = 5 * time.Second

// connCaps caps the connections open at once on all of a server's
// listeners, in all and per client address, so one client cannot take
// every socket and file descriptor. A client address's connections are
// counted in two groups, each capped at perIP: those that have not yet
// made a request that passed the Host, Origin and credential checks
// (pending), and those that have (admitted). A connection beyond the total
// cap is closed as soon as it is accepted. A new connection from an
// address whose pending group is full takes the place of its oldest
// pending one, which is closed: connections that send half a request, or
// none, cannot hold an address's places, and a client's established
// sessions are not counted against its new ones. A request that would
// admit a connection past its address's admitted cap is answered 503 and
// its connection closed.
type connCaps struct {
	max, perIP int
	log        *slog.Logger

	mu       sync.Mutex
	total    int
	pending  map[string][]*capConn // by client address, oldest first
	admitted map[string]int
	lastWarn time.Time
}

func newConnCaps(max, perIP int, log *slog.Logger) *connCaps {
	return &connCaps{max: max, perIP: perIP, log: log, pending: map[string][]*capConn{}, admitted: map[string]int{}}
}

// wrap returns l with its connections counted against the caps.
func (c *connCaps) wrap(l net.Listener) net.Listener { return &capListener{Listener: l, caps: c} }

type capListener struct {
	net.Listener
	caps *connCaps
}

// Accept returns the next connection within the caps.
func (cl *capListener) Accept() (net.Conn, error) {
	l := cl.caps
	for {
		c, err := cl.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := c.RemoteAddr().String()
		if h, _, err := net.SplitHostPort(ip); err == nil {
			ip = h
		}
		cc := &capConn{Conn: c, l: l, ip: ip}
		l.mu.Lock()
		if l.total >= l.max {
			warn, total := l.warnNow(), l.total
			l.mu.Unlock()
			if warn {
				l.log.Warn("refused a connection over the connection cap (--max-conns)", "client", ip, "open", total)
			}
			_ = c.Close()
			continue
		}
		var evict *capConn
		if q := l.pending[ip]; len(q) >= l.perIP {
			evict = q[0]
			l.pending[ip] = q[1:]
			evict.gone = true
			l.total--
		}
		l.pending[ip] = append(l.pending[ip], cc)
		l.total++
		l.mu.Unlock()
		if evict != nil {
			_ = evict.Conn.Close()
		}
		return cc, nil
	}
}

// warnNow reports whether a refusal is to be logged: at most once a
// minute. l.mu is held.
func (l *connCaps) warnNow() bool {
	if time.Since(l.lastWarn) < time.Minute {
		return false
	}
	l.lastWarn = time.Now()
	return true
}

// admit moves c from its address's pending connections to its admitted
// ones; false means the admitted ones are at the cap.
func (l *connCaps) admit(c *capConn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.admitted || c.gone {
		return true
	}
	if l.admitted[c.ip] >= l.perIP {
		return false
	}
	l.unpend(c)
	c.admitted = true
	l.admitted[c.ip]++
	return true
}

// unpend drops c from its address's pending connections. l.mu is held.
func (l *connCaps) unpend(c *capConn) {
	q := l.pending[c.ip]
	for i, p := range q {
		if p == c {
			q = append(q[:i:i], q[i+1:]...)
			break
		}
	}
	if len(q) == 0 {
		delete(l.pending, c.ip)
	} else {
		l.pending[c.ip] = q
	}
}

// release gives c's place back.
func (l *connCaps) release(c *capConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case c.gone:
		return // evicted: its place was given to another
	case c.admitted:
		if l.admitted[c.ip]--; l.admitted[c.ip] <= 0 {
			delete(l.admitted, c.ip)
		}
	default:
		l.unpend(c)
	}
	c.gone = true
	l.total--
}

// capConn gives its place back when it closes, whoever closes it (the
// HTTP server, or a WebSocket that took the connection over).
type capConn struct {
	net.Conn
	l  *connCaps
	ip string
	// admitted and gone are the caps', under their lock: the connection
	// made a request that passed the checks; it no longer counts.
	admitted, gone bool
	once           sync.Once
}

func (c *capConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c) })
	return err
}

// capConnKey carries a request's *capConn in its context.
type capConnKey struct{}

// connContext is the http.Server's ConnContext: it lets the handlers find
// the connection a request came on.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if cc, ok := c.(*capConn); ok {
		return context.WithValue(ctx, capConnKey{}, cc)
	}
	return ctx
}

// admitting counts the connection of every request that reaches h (one
// that passed the Host, Origin and credential checks) among its
// address's admitted connections; past their cap the request is answered
// 503 and its connection closed.
func (l *connCaps) admitting(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if cc, ok := r.Context().Value(capConnKey{}).(*capConn); ok && !l.admit(cc) {
			l.mu.Lock()
			warn := l.warnNow()
			l.mu.Unlock()
			if warn {
				l.log.Warn("refused a request over the connection cap per client address (--max-conns-per-ip)", "client", cc.ip)
			}
			w.Header().Set("Connection", "close")
			w.Header().Set("Retry-After", "5")
			http.Error(w, "too many connections from your address (--max-conns-per-ip)", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	})
}
