package builtin_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/tools"
	"github.com/agentwire/agentwire/internal/tools/builtin"
)

// fakeDNS answers from a table, so no test asks a real resolver.
type fakeDNS map[string][]netip.Addr

func (d fakeDNS) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := d[strings.TrimSuffix(host, ".")]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// counted is a test server that counts its requests.
type counted struct {
	*httptest.Server
	hits atomic.Int64
}

func serve(t *testing.T, h http.HandlerFunc) *counted {
	c := &counted{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.hits.Add(1)
		h(w, r)
	}))
	t.Cleanup(c.Close)
	return c
}

func (c *counted) addrPort() netip.AddrPort {
	return netip.MustParseAddrPort(c.Listener.Addr().String())
}

func (c *counted) port() uint16 { return c.addrPort().Port() }

// allowOnly lets exactly one local server through the default guard.
func allowOnly(allowed netip.AddrPort) func(netip.AddrPort) error {
	return func(ap netip.AddrPort) error {
		if ap == allowed {
			return nil
		}
		return builtin.PublicOnly(ap)
	}
}

var loopbackDNS = fakeDNS{
	"localhost":          {netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")},
	"evil.test":          {netip.MustParseAddr("127.0.0.1")},
	"mixed.test":         {netip.MustParseAddr("93.184.215.14"), netip.MustParseAddr("10.1.2.3")},
	"metadata.test":      {netip.MustParseAddr("169.254.169.254")},
	"mapped.test":        {netip.MustParseAddr("::ffff:192.168.0.1")},
	"allowed.test":       {netip.MustParseAddr("127.0.0.1")},
	"rebind-to-v6.test":  {netip.MustParseAddr("fd00::1")},
	"nat64-to-lo.test":   {netip.MustParseAddr("64:ff9b::7f00:1")},
	"cgnat.test":         {netip.MustParseAddr("100.64.0.1")},
	"this-network.test":  {netip.MustParseAddr("0.1.2.3")},
	"multicast.test":     {netip.MustParseAddr("224.0.0.1")},
	"unspecified.test":   {netip.MustParseAddr("::")},
	"linklocal-v6.test":  {netip.MustParseAddr("fe80::1")},
	"private-172.test":   {netip.MustParseAddr("172.16.5.4")},
	"private-192.test":   {netip.MustParseAddr("192.168.1.1")},
	"broadcast.test":     {netip.MustParseAddr("255.255.255.255")},
	"benchmarking.test":  {netip.MustParseAddr("198.18.0.1")},
	"site-local-v6.test": {netip.MustParseAddr("fec0::1")},
}

func fetchEnv(t *testing.T, fo builtin.FetchOptions) *env {
	if fo.Resolver == nil {
		fo.Resolver = loopbackDNS
	}
	return newEnv(t, builtin.Options{Fetch: fo})
}

// TestFetchRefusesPrivateAddresses points web_fetcher at a live loopback
// server by every route an attacker might try and checks that the server
// never sees a request.
func TestFetchRefusesPrivateAddresses(t *testing.T) {
	target := serve(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "internal secret") })
	p := target.port()
	e := fetchEnv(t, builtin.FetchOptions{})

	urls := []string{
		fmt.Sprintf("http://127.0.0.1:%d/", p),
		fmt.Sprintf("http://localhost:%d/", p),
		fmt.Sprintf("http://[::1]:%d/", p),
		fmt.Sprintf("http://evil.test:%d/", p),
		fmt.Sprintf("http://evil.test.:%d/", p),
		fmt.Sprintf("http://2130706433:%d/", p),
		fmt.Sprintf("http://0x7f000001:%d/", p),
		fmt.Sprintf("http://0x7f.0.0.1:%d/", p),
		fmt.Sprintf("http://0177.0.0.1:%d/", p),
		fmt.Sprintf("http://127.1:%d/", p),
		fmt.Sprintf("http://127.000.000.001:%d/", p),
		fmt.Sprintf("http://[::ffff:127.0.0.1]:%d/", p),
		fmt.Sprintf("http://[::ffff:7f00:1]:%d/", p),
		fmt.Sprintf("http://0.0.0.0:%d/", p),
		fmt.Sprintf("http://0:%d/", p),
		fmt.Sprintf("http://nat64-to-lo.test:%d/", p),
		fmt.Sprintf("gopher://127.0.0.1:%d/", p),
		"http://169.254.169.254/latest/meta-data/",
		"http://metadata.test/latest/meta-data/",
		"http://[fd00:ec2::254]/latest/meta-data/",
		"http://10.0.0.1/",
		"http://mixed.test/",
		"http://mapped.test/",
		"http://rebind-to-v6.test/",
		"http://cgnat.test/",
		"http://this-network.test/",
		"http://multicast.test/",
		"http://unspecified.test/",
		"http://linklocal-v6.test/",
		"http://[fe80::1%25eth0]/",
		"http://private-172.test/",
		"http://private-192.test/",
		"http://broadcast.test/",
		"http://benchmarking.test/",
		"http://site-local-v6.test/",
		"file:///etc/passwd",
		"ftp://example.com/",
		"javascript:alert(1)",
		"http:///nohost",
	}
	for _, u := range urls {
		res := e.call("web_fetcher", map[string]any{"url": u})
		if !res.IsError || !strings.HasPrefix(res.Content, "refused: ") {
			t.Errorf("web_fetcher(%s) = %+v, want a refusal", u, res)
		}
	}
	require.Zero(t, target.hits.Load(), "the internal server was reached")
}

func TestFetchRefusesRedirectsInward(t *testing.T) {
	internal := serve(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "internal secret") })
	var next atomic.Value
	public := serve(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, next.Load().(string), http.StatusFound)
	})
	e := fetchEnv(t, builtin.FetchOptions{Guard: allowOnly(public.addrPort())})

	for _, to := range []string{
		internal.URL + "/",
		fmt.Sprintf("http://localhost:%d/", internal.port()),
		fmt.Sprintf("http://evil.test:%d/", internal.port()),
		"http://169.254.169.254/latest/meta-data/",
		"http://[::1]/",
		"file:///etc/passwd",
	} {
		next.Store(to)
		res := e.call("web_fetcher", map[string]any{"url": public.URL + "/start"})
		if !res.IsError || !strings.Contains(res.Content, "refused") && !strings.Contains(res.Content, "only http and https") {
			t.Errorf("redirect to %s: %+v, want a refusal", to, res)
		}
	}
	require.Equal(t, int64(6), public.hits.Load())
	require.Zero(t, internal.hits.Load(), "the internal server was reached through a redirect")

	// A redirect that stays on the allowed server is followed.
	next.Store(public.URL + "/start")
	res := e.call("web_fetcher", map[string]any{"url": public.URL + "/start"})
	require.True(t, res.IsError)
	require.Contains(t, res.Content, "more than 5 redirects")
}

func TestFetch(t *testing.T) {
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/page":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, `<!doctype html><html><head><title>Title</title><style>p{color:red}</style>
<script>var secret = 1;</script></head><body><h1>Hello</h1><p>First &amp; second
paragraph.</p><ul><li>one</li><li>two</li></ul></body></html>`)
		case "/json":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"a":1}`)
		case "/big":
			w.Header().Set("Content-Type", "text/plain")
			fmt.Fprint(w, strings.Repeat("x", 5000))
		case "/png":
			w.Header().Set("Content-Type", "image/png")
			w.Write([]byte("\x89PNG\r\n\x1a\n0000"))
		case "/moved":
			http.Redirect(w, r, "/json", http.StatusMovedPermanently)
		default:
			http.NotFound(w, r)
		}
	})
	e := fetchEnv(t, builtin.FetchOptions{Guard: allowOnly(srv.addrPort()), MaxBytes: 1000})
	get := func(path string) tools.Result {
		return e.call("web_fetcher", map[string]any{"url": srv.URL + path})
	}

	res := get("/page")
	require.False(t, res.IsError)
	require.Equal(t, "URL: "+srv.URL+"/page\nStatus: 200 OK\nContent-Type: text/html; charset=utf-8\n\nTitle\n\nHello\n\nFirst & second paragraph.\n\none\n\ntwo", res.Content)

	res = get("/moved")
	require.Equal(t, "URL: "+srv.URL+"/json\nStatus: 200 OK\nContent-Type: application/json\n\n{\"a\":1}", res.Content)

	res = get("/big")
	require.True(t, strings.HasSuffix(res.Content, "\n\n"+strings.Repeat("x", 1000)+"\n[truncated: only the first 1000 bytes were read]"))

	res = get("/png")
	require.True(t, strings.HasSuffix(res.Content, "\n\n(12 bytes of image/png, not shown)"), res.Content)

	res = get("/missing")
	require.True(t, res.IsError)
	require.Contains(t, res.Content, "Status: 404 Not Found")

	// The fetcher only reads: it runs under every policy.
	require.Equal(t, tools.Class{Effect: tools.EffectNetwork, Key: "web_fetcher"}, e.classify("web_fetcher", map[string]any{"url": "http://x"}))
}

func TestFetchCancelled(t *testing.T) {
	release := make(chan struct{})
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	e := fetchEnv(t, builtin.FetchOptions{Guard: allowOnly(srv.addrPort())})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	res, _, err := e.callCtx(ctx, "web_fetcher", map[string]any{"url": srv.URL})
	require.NoError(t, err)
	require.True(t, res.IsError)
	require.True(t, strings.Contains(res.Content, context.Canceled.Error()), res.Content)
}

func TestPublicOnly(t *testing.T) {
	for _, s := range []string{"93.184.215.14:80", "[2606:2800:21f:cb07:6820:80da:af6b:8b2c]:443", "8.8.8.8:53"} {
		require.NoError(t, builtin.PublicOnly(netip.MustParseAddrPort(s)), s)
	}
	for _, s := range []string{"127.0.0.1:80", "10.0.0.1:80", "172.31.255.255:80", "192.168.0.1:80", "169.254.169.254:80",
		"100.64.0.1:80", "0.0.0.0:80", "224.0.0.1:80", "[::1]:80", "[fc00::1]:80", "[fe80::1]:80", "[::]:80",
		"[::ffff:10.0.0.1]:80", "[64:ff9b::a00:1]:80", "[ff02::1]:80"} {
		err := builtin.PublicOnly(netip.MustParseAddrPort(s))
		require.True(t, errors.Is(err, builtin.ErrForbiddenAddress), "%s: %v", s, err)
	}
}
