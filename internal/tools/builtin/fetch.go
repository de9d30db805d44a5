package builtin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/net/html"

	"github.com/agentwire/agentwire/internal/tools"
)

// ErrForbiddenAddress is matched by the errors of web_fetcher's address
// guard: the model may not make the server reach its own network.
var ErrForbiddenAddress = errors.New("forbidden address")

// Resolver looks host names up; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// FetchOptions tunes web_fetcher.
type FetchOptions struct {
	// MaxBytes caps the body read (default 1 MiB).
	MaxBytes int64
	// Timeout bounds a whole fetch, redirects included (default 30 s).
	Timeout time.Duration
	// MaxRedirects (default 5).
	MaxRedirects int
	// Guard decides whether an address may be connected to; it runs for
	// every address a name resolves to and again for the address each
	// connection is made to, so redirects and DNS rebinding meet it too.
	// Default PublicOnly. Tests wrap it to let one local server in.
	Guard func(netip.AddrPort) error
	// Resolver looks names up (default net.DefaultResolver).
	Resolver Resolver
	// UserAgent is sent with every request.
	UserAgent string
}

func (o FetchOptions) withDefaults() FetchOptions {
	if o.MaxBytes <= 0 {
		o.MaxBytes = 1 << 20
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if o.MaxRedirects <= 0 {
		o.MaxRedirects = 5
	}
	if o.Guard == nil {
		o.Guard = PublicOnly
	}
	if o.Resolver == nil {
		o.Resolver = net.DefaultResolver
	}
	if o.UserAgent == "" {
		o.UserAgent = "agentwire-web-fetcher/1"
	}
	return o
}

// Address ranges PublicOnly refuses beyond what netip classifies.
var forbiddenPrefixes = []struct {
	p    netip.Prefix
	kind string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "this-network"},
	{netip.MustParsePrefix("100.64.0.0/10"), "carrier-grade NAT"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
	{netip.MustParsePrefix("100::/64"), "discard"},
	{netip.MustParsePrefix("fec0::/10"), "site-local"},
}

// nat64 embeds an IPv4 address in its last 32 bits.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// PublicOnly refuses every address but public unicast ones: loopback,
// private (10/8, 172.16/12, 192.168/16, fc00::/7), link-local (169.254/16,
// where cloud metadata services answer, and fe80::/10), carrier-grade NAT,
// multicast, unspecified, reserved; IPv4 addresses mapped or translated
// into IPv6 are judged as the IPv4 address they carry.
func PublicOnly(ap netip.AddrPort) error {
	a := ap.Addr().WithZone("").Unmap()
	if nat64.Contains(a) {
		b := a.As16()
		a = netip.AddrFrom4([4]byte(b[12:]))
	}
	kind := ""
	switch {
	case !a.IsValid():
		kind = "invalid"
	case a.IsLoopback():
		kind = "loopback"
	case a.IsPrivate():
		kind = "private"
	case a.IsLinkLocalUnicast():
		kind = "link-local (cloud metadata)"
	case a.IsUnspecified():
		kind = "unspecified"
	case a.IsMulticast():
		kind = "multicast"
	default:
		for _, f := range forbiddenPrefixes {
			if f.p.Contains(a) {
				kind = f.kind
				break
			}
		}
	}
	if kind == "" {
		return nil
	}
	return fmt.Errorf("%w: %s is a %s address", ErrForbiddenAddress, a, kind)
}

// numericHost matches host names that C resolvers read as IPv4 addresses
// (2130706433, 0x7f000001, 0177.0.0.1, 127.1) but Go does not.
var numericHost = regexp.MustCompile(`(?i)^(0x[0-9a-f]*|[0-9]+)(\.(0x[0-9a-f]*|[0-9]+))*\.?$`)

// fetcher fetches URLs through a client whose every connection passes the
// guard.
type fetcher struct {
	opts   FetchOptions
	client *http.Client
	log    *slog.Logger
}

func newFetcher(opts FetchOptions, log *slog.Logger) *fetcher {
	f := &fetcher{opts: opts, log: log}
	f.client = &http.Client{
		Transport: &http.Transport{
			Proxy:                  nil, // a proxy would connect on our behalf, past the guard
			DialContext:            f.dial,
			ForceAttemptHTTP2:      true,
			DisableKeepAlives:      true, // no idle connections outliving a call
			TLSHandshakeTimeout:    10 * time.Second,
			MaxResponseHeaderBytes: 64 << 10,
		},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > opts.MaxRedirects {
				return fmt.Errorf("more than %d redirects", opts.MaxRedirects)
			}
			return checkURL(req.URL)
		},
		Timeout: opts.Timeout,
	}
	return f
}

func checkURL(u *url.URL) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("only http and https URLs can be fetched, not %q", u.Scheme)
	}
	if u.Hostname() == "" {
		return errors.New("the URL has no host")
	}
	return nil
}

// dial resolves the host itself, refuses it if any of its addresses is
// forbidden, and connects to a checked address (checked once more as the
// socket connects).
func (f *fetcher) dial(ctx context.Context, network, address string) (net.Conn, error) {
	host, portStr, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("bad port %q", portStr)
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else if numericHost.MatchString(host) {
		return nil, fmt.Errorf("%w: %q is an IP address in a non-standard form", ErrForbiddenAddress, host)
	} else if addrs, err = f.opts.Resolver.LookupNetIP(ctx, "ip", host); err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("%s has no addresses", host)
	}
	for _, a := range addrs {
		if err := f.opts.Guard(netip.AddrPortFrom(a.Unmap(), uint16(port))); err != nil {
			return nil, fmt.Errorf("%s: %w", host, err)
		}
	}
	d := net.Dialer{
		Timeout: 10 * time.Second,
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return err
			}
			return f.opts.Guard(netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()))
		},
	}
	for _, a := range addrs {
		var conn net.Conn
		if conn, err = d.DialContext(ctx, network, netip.AddrPortFrom(a.Unmap(), uint16(port)).String()); err == nil {
			return conn, nil
		}
	}
	return nil, err
}

type fetchArgs struct {
	URL string `json:"url"`
}

func webFetcherTool(opts FetchOptions, log *slog.Logger) tools.Tool {
	f := newFetcher(opts, log)
	return &tool[fetchArgs]{
		name: "web_fetcher",
		desc: fmt.Sprintf("Fetch a public http(s) URL and return its text (HTML is reduced to text). Private, loopback and link-local addresses are refused. At most %d bytes are read.", opts.MaxBytes),
		schema: `{"type":"object","properties":{"url":{"type":"string","description":"An http or https URL"}},` +
			`"required":["url"],"additionalProperties":false}`,
		// Reaching the network is an effect of its own: a fetch can carry
		// what the model read out of the machine, in its URL.
		max: tools.EffectNetwork,
		run: func(ctx context.Context, a fetchArgs, _ tools.Output) (tools.Result, error) {
			return f.fetch(ctx, a.URL), nil
		},
	}
}

func (f *fetcher) fetch(ctx context.Context, raw string) tools.Result {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return failf("invalid URL: %v", err)
	}
	if err := checkURL(u); err != nil {
		return failf("refused: %v", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return failf("invalid URL: %v", err)
	}
	req.Header.Set("User-Agent", f.opts.UserAgent)
	req.Header.Set("Accept", "text/html, text/plain, application/json, */*;q=0.5")
	resp, err := f.client.Do(req)
	if err != nil {
		if errors.Is(err, ErrForbiddenAddress) {
			f.log.Info("web_fetcher refused an address", "url", u.Redacted(), "err", err)
			return failf("refused: %v", err)
		}
		return failf("fetch %s: %v", u.Redacted(), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, f.opts.MaxBytes+1))
	if err != nil {
		return failf("fetch %s: reading the body: %v", u.Redacted(), err)
	}
	truncated := int64(len(body)) > f.opts.MaxBytes
	if truncated {
		body = body[:f.opts.MaxBytes]
	}
	ctype := resp.Header.Get("Content-Type")
	mt, _, _ := mime.ParseMediaType(ctype)
	if mt == "" {
		mt = http.DetectContentType(body)
		mt, _, _ = mime.ParseMediaType(mt)
	}
	var text string
	switch {
	case mt == "text/html" || mt == "application/xhtml+xml":
		text = htmlText(string(body))
	case strings.HasPrefix(mt, "text/") || mt == "application/json" || strings.HasSuffix(mt, "+json") ||
		strings.HasSuffix(mt, "xml") || mt == "application/javascript":
		text = strings.ToValidUTF8(string(body), "\uFFFD")
	default:
		text = fmt.Sprintf("(%d bytes of %s, not shown)", len(body), mt)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "URL: %s\nStatus: %s\nContent-Type: %s\n\n%s", resp.Request.URL.Redacted(), resp.Status, ctype, text)
	if truncated {
		fmt.Fprintf(&b, "\n[truncated: only the first %d bytes were read]", f.opts.MaxBytes)
	}
	return tools.Result{Content: b.String(), IsError: resp.StatusCode >= 400}
}

// htmlText reduces an HTML page to its readable text: scripts, styles and
// markup go, block elements become line breaks, blank runs collapse.
func htmlText(s string) string {
	z := html.NewTokenizer(strings.NewReader(s))
	var b strings.Builder
	skip, pre := 0, 0 // inside script, style, ...; inside pre
	for {
		switch tt := z.Next(); tt {
		case html.ErrorToken:
			return collapseBlank(b.String())
		case html.TextToken:
			switch {
			case skip > 0:
			case pre > 0:
				b.Write(z.Text())
			default: // line breaks in the source are spaces on the page
				b.WriteString(strings.ReplaceAll(string(z.Text()), "\n", " "))
			}
		case html.StartTagToken, html.EndTagToken, html.SelfClosingTagToken:
			name, _ := z.TagName()
			tag := string(name)
			switch tag {
			case "script", "style", "noscript", "template", "svg":
				if tt == html.StartTagToken {
					skip++
				} else if skip > 0 {
					skip--
				}
			case "pre":
				if tt == html.StartTagToken {
					pre++
				} else if tt == html.EndTagToken && pre > 0 {
					pre--
				}
				b.WriteByte('\n')
			case "br", "p", "div", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section", "article", "header", "footer", "table", "ul", "ol", "blockquote", "title":
				b.WriteByte('\n')
			case "td", "th":
				b.WriteByte('\t')
			}
		}
	}
}

func collapseBlank(s string) string {
	var out []string
	blank := false
	for _, l := range strings.Split(s, "\n") {
		l = strings.Join(strings.Fields(l), " ")
		if l == "" {
			if !blank && len(out) > 0 {
				out = append(out, "")
			}
			blank = true
			continue
		}
		blank = false
		out = append(out, l)
	}
	return strings.TrimSpace(strings.Join(out, "\n"))
}
