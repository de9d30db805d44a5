package server

import (
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/rs/cors"

	"github.com/agentwire/agentwire/internal/config"
)

// guard checks every request before any handler sees it, in this order:
//
//  1. Host: only names the server is meant to be reached by (the loopback
//     names, IP literals, --allowed-hosts). A web page that rebinds its
//     own DNS name to 127.0.0.1 still sends its own name as Host, and is
//     refused with 421, so no local agentwire can be driven by DNS
//     rebinding.
//  2. CORS: for --allowed-origins, the threads API answers preflights and
//     lets those origins read its answers (rs/cors). Without
//     --allowed-origins no cross-origin reading is allowed.
//  3. Origin: a WebSocket upgrade or a request that changes state (any
//     method but GET, HEAD and OPTIONS) from a browser must come from the
//     server's own origin or an allowed one; others get 403, and the
//     server logs the flag that would allow them.
//  4. Body: reading a request's body has a deadline (--body-timeout), so a
//     client that trickles a body cannot hold a handler.
type guard struct {
	hosts       map[string]bool // lower-case names allowed besides IP literals and loopback names
	origins     []string
	cors        *cors.Cors // nil without --allowed-origins
	bodyTimeout time.Duration
	log         *slog.Logger

	// refusals are logged at most once a minute per origin or host.
	mu     sync.Mutex
	logged map[string]time.Time
}

func newGuard(cfg config.Config, log *slog.Logger) *guard {
	g := &guard{hosts: map[string]bool{"localhost": true}, origins: cfg.AllowedOrigins,
		bodyTimeout: cfg.BodyTimeout, log: log, logged: map[string]time.Time{}}
	for _, h := range cfg.AllowedHosts {
		g.hosts[strings.ToLower(strings.TrimSuffix(h, "."))] = true
	}
	if len(cfg.AllowedOrigins) > 0 {
		g.cors = cors.New(cors.Options{
			AllowedOrigins: cfg.AllowedOrigins,
			AllowedMethods: []string{http.MethodGet, http.MethodHead, http.MethodPost},
			AllowedHeaders: []string{"Content-Type", "Authorization", "Last-Event-ID"},
			MaxAge:         600,
		})
	}
	return g
}

func (g *guard) handler(next http.Handler) http.Handler { return g.wrap(next, true) }

// debugHandler guards the --debug-addr listener: the same checks without
// CORS, so that no origin, however allowed, reads profiles cross-origin.
func (g *guard) debugHandler(next http.Handler) http.Handler { return g.wrap(next, false) }

func (g *guard) wrap(next http.Handler, withCORS bool) http.Handler {
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !g.originAllowed(r) {
			origin := r.Header.Get("Origin")
			g.logOnce("origin "+origin, "refused a cross-origin request; --allowed-origins "+origin+" would allow it",
				"origin", origin, "method", r.Method, "path", r.URL.Path, "websocket", isUpgrade(r))
			http.Error(w, "cross-origin request refused: the origin "+origin+" is not allowed (the server's --allowed-origins)", http.StatusForbidden)
			return
		}
		if g.bodyTimeout > 0 && !isUpgrade(r) && r.ContentLength != 0 {
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(g.bodyTimeout))
		}
		next.ServeHTTP(w, r)
	})
	var h http.Handler = inner
	if g.cors != nil && withCORS {
		h = g.cors.Handler(inner)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !g.hostAllowed(r.Host) {
			g.logOnce("host "+r.Host, "refused a request for a host this server does not serve; --allowed-hosts would allow it",
				"host", r.Host, "path", r.URL.Path)
			http.Error(w, "this server does not serve the host "+r.Host+" (the server's --allowed-hosts)", http.StatusMisdirectedRequest)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// hostAllowed reports whether a Host header names this server: an IP
// literal (DNS rebinding needs a name), a loopback name, or an allowed one.
func (g *guard) hostAllowed(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if host == "" {
		return false
	}
	if net.ParseIP(host) != nil {
		return true
	}
	return g.hosts[host] || strings.HasSuffix(host, ".localhost")
}

// originAllowed reports whether r may go on: it is not a cross-origin
// WebSocket upgrade or state-changing request, or its origin is allowed.
func (g *guard) originAllowed(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true // not a browser
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		if !isUpgrade(r) {
			return true // a browser does not let a page read the answer without CORS
		}
	}
	if u, err := url.Parse(origin); err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host) {
		return true // same origin
	}
	return g.cors != nil && g.cors.OriginAllowed(r)
}

func isUpgrade(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// logOnce logs a refusal, at most once a minute per key.
func (g *guard) logOnce(key, msg string, args ...any) {
	g.mu.Lock()
	last, seen := g.logged[key]
	now := time.Now()
	if seen && now.Sub(last) < time.Minute {
		g.mu.Unlock()
		return
	}
	if len(g.logged) > 1000 {
		clear(g.logged)
	}
	g.logged[key] = now
	g.mu.Unlock()
	g.log.Warn(msg, args...)
}

// originsDesc says which browser origins may use the server, for the
// banner.
func originsDesc(origins []string) string {
	if len(origins) == 0 {
		return "same-origin only (--allowed-origins adds more, e.g. http://localhost:5173)"
	}
	return "same-origin and " + strings.Join(origins, ", ")
}
