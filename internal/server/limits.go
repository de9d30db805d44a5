package server

import (
	"log/slog"
	"net"
	"sync"
	"time"
)

// connCaps caps the connections open at once on all of a server's
// listeners, in all and per client address: a connection beyond either cap
// is closed as soon as it is accepted, so one client cannot take every
// socket and file descriptor.
type connCaps struct {
	max, perIP int
	log        *slog.Logger

	mu       sync.Mutex
	total    int
	per      map[string]int
	lastWarn time.Time
}

func newConnCaps(max, perIP int, log *slog.Logger) *connCaps {
	return &connCaps{max: max, perIP: perIP, log: log, per: map[string]int{}}
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
		l.mu.Lock()
		if l.total >= l.max || l.per[ip] >= l.perIP {
			warn := time.Since(l.lastWarn) > time.Minute
			if warn {
				l.lastWarn = time.Now()
			}
			total, mine := l.total, l.per[ip]
			l.mu.Unlock()
			if warn {
				l.log.Warn("refused a connection over the connection caps (--max-conns, --max-conns-per-ip)",
					"client", ip, "open", total, "open_from_client", mine)
			}
			_ = c.Close()
			continue
		}
		l.total++
		l.per[ip]++
		l.mu.Unlock()
		return &capConn{Conn: c, l: l, ip: ip}, nil
	}
}

func (l *connCaps) release(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total--
	if l.per[ip]--; l.per[ip] <= 0 {
		delete(l.per, ip)
	}
}

// capConn gives its place back when it closes, whoever closes it (the
// HTTP server, or a WebSocket that took the connection over).
type capConn struct {
	net.Conn
	l    *connCaps
	ip   string
	once sync.Once
}

func (c *capConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.ip) })
	return err
}
