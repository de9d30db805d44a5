package server

import (
	"encoding/json"
	"expvar"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime/metrics"
	"strings"
)

// The --debug-addr listener serves what a person profiling the server
// needs, on loopback only:
//
//   - /debug/pprof/: the Go profiler (net/http/pprof): the index, every
//     named profile (heap, goroutine, allocs, block, mutex, threadcreate),
//     CPU profiles, execution traces and symbols. Not the command line,
//     which can carry a --database-url password.
//   - /debug/vars: expvar's variables (memstats and whatever else the
//     process publishes), without cmdline for the same reason, and
//     "agentwire": this server's own numbers.
//   - /debug/metrics: a sample of every runtime/metrics metric, as one JSON
//     object by metric name; a histogram as its count and quantiles.
//
// Requests pass the server's Host and Origin checks (not CORS): a web page
// cannot read them by DNS rebinding.

// checkDebugAddr refuses a --debug-addr that other machines could reach:
// only a loopback IP address or localhost is served.
func checkDebugAddr(addr string) error { return checkLoopback("--debug-addr", addr, "6060") }

// checkLoopback refuses an address of flag's that other machines could
// reach: only a loopback IP address or localhost is served.
func checkLoopback(flag, addr, port string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s %q: %v", flag, addr, err)
	}
	if strings.EqualFold(host, "localhost") {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return errExposed(flag, addr, port)
}

func errExposed(flag, addr, port string) error {
	return fmt.Errorf("refusing %s %s: the profiler and metrics are served on a loopback address only "+
		"(127.0.0.1, [::1] or localhost, e.g. %s 127.0.0.1:%s), never where other machines can reach them; "+
		"to read them from another machine, forward its loopback port (ssh -L %s:127.0.0.1:%s HOST)", flag, addr, flag, port, port, port)
}

// listenLoopback binds an address of flag's, and refuses one that did not
// bind to loopback after all (localhost resolved elsewhere).
func listenLoopback(flag, addr, port string) (net.Listener, error) {
	if err := checkLoopback(flag, addr, port); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s (%s): %w", addr, flag, err)
	}
	if ta, ok := ln.Addr().(*net.TCPAddr); !ok || !ta.IP.IsLoopback() {
		ln.Close()
		return nil, errExposed(flag, addr+" (bound to "+ln.Addr().String()+")", port)
	}
	return ln, nil
}

// metricsHandler serves the --metrics-addr listener: the Prometheus
// metrics at /metrics, behind the Host and Origin checks.
func (s *Server) metricsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", s.metrics.Handler())
	return s.guard.debugHandler(mux)
}

// debugHandler serves the --debug-addr listener.
func (s *Server) debugHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/debug/pprof/cmdline", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "not served: the command line can carry secrets (a --database-url password)", http.StatusNotFound)
	})
	mux.HandleFunc("GET /debug/vars", s.debugVars)
	mux.HandleFunc("GET /debug/metrics", debugMetrics)
	mux.Handle("GET /metrics", s.metrics.Handler())
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/debug/pprof/", http.StatusFound)
	})
	return s.guard.debugHandler(mux)
}

// debugVars writes expvar's variables as expvar.Handler does, without
// cmdline, and with this server's own under "agentwire".
func (s *Server) debugVars(w http.ResponseWriter, r *http.Request) {
	own, err := json.Marshal(map[string]any{
		"node":       s.node,
		"websockets": s.reg.Len(),
	})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	var b strings.Builder
	b.WriteString("{\n")
	expvar.Do(func(kv expvar.KeyValue) {
		if kv.Key == "cmdline" {
			return
		}
		key, _ := json.Marshal(kv.Key)
		fmt.Fprintf(&b, "%s: %s,\n", key, kv.Value)
	})
	fmt.Fprintf(&b, "%q: %s\n}\n", "agentwire", own)
	_, _ = w.Write([]byte(b.String()))
}

// debugMetrics writes a sample of every runtime/metrics metric.
func debugMetrics(w http.ResponseWriter, r *http.Request) {
	descs := metrics.All()
	samples := make([]metrics.Sample, len(descs))
	for i, d := range descs {
		samples[i].Name = d.Name
	}
	metrics.Read(samples)
	out := make(map[string]any, len(samples))
	for _, s := range samples {
		switch s.Value.Kind() {
		case metrics.KindUint64:
			out[s.Name] = s.Value.Uint64()
		case metrics.KindFloat64:
			if f := s.Value.Float64(); !math.IsInf(f, 0) && !math.IsNaN(f) {
				out[s.Name] = f
			}
		case metrics.KindFloat64Histogram:
			out[s.Name] = summarize(s.Value.Float64Histogram())
		}
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(out)
}

// histogram is a runtime/metrics histogram as /debug/metrics shows it:
// how many samples, and the 50th, 90th, 99th percentiles and the largest,
// each as the upper bound of its bucket (the lower one for the last,
// unbounded bucket).
type histogram struct {
	Count uint64   `json:"count"`
	P50   *float64 `json:"p50,omitempty"`
	P90   *float64 `json:"p90,omitempty"`
	P99   *float64 `json:"p99,omitempty"`
	Max   *float64 `json:"max,omitempty"`
}

func summarize(h *metrics.Float64Histogram) histogram {
	var out histogram
	for _, c := range h.Counts {
		out.Count += c
	}
	if out.Count == 0 {
		return out
	}
	// bound is a finite edge of bucket i: its upper one, else its lower.
	bound := func(i int) *float64 {
		for _, v := range []float64{h.Buckets[i+1], h.Buckets[i]} {
			if !math.IsInf(v, 0) {
				return &v
			}
		}
		return nil
	}
	quantile := func(q float64) *float64 {
		rank := uint64(math.Ceil(q * float64(out.Count)))
		var seen uint64
		for i, c := range h.Counts {
			seen += c
			if seen >= rank && c > 0 {
				return bound(i)
			}
		}
		return nil
	}
	out.P50, out.P90, out.P99 = quantile(0.5), quantile(0.9), quantile(0.99)
	for i := len(h.Counts) - 1; i >= 0; i-- {
		if h.Counts[i] > 0 {
			out.Max = bound(i)
			break
		}
	}
	return out
}
