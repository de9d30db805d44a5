package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/agentwire/agentwire/internal/config"
)

// The tours of docs/SCENARIOS.md ("Tours: every frame of a protocol"),
// followed row by row as the page tells a person to, against a real
// server through real clients: each test waits for the frame each row
// names and sends exactly what the row says (with the placeholders taken
// from that frame), then checks that every server→client frame type of
// the protocol's schema documents came by, but for the ones the page says
// a tour cannot produce.

// placeholder is a value a row's frame takes from the frame it waited
// for: <request_id> is that frame's request_id.
var placeholder = regexp.MustCompile(`<([A-Za-z_]+)>`)

// tourFrame is one frame a tour's client received: the names a row may
// wait for (its type, and the type of what it carries: a Loom event, an
// AgentLoop item), the frame as sent, and decoded.
type tourFrame struct {
	names []string
	raw   string
	obj   map[string]any
}

// tourClient is a client of one protocol: it sends a row's frames and
// reads what the server sends.
type tourClient interface {
	send(ctx context.Context, frame string) error
	next(ctx context.Context) (tourFrame, error)
}

// tourRow is a row of a tour's table: the frame the server sends (the
// first code span names it; `field: value` spans and a quoted text must
// be in it too) and the frames to send then.
type tourRow struct {
	row    string
	name   string // "" for the first row: send at once
	text   string
	fields map[string]string
	send   []string
}

// tourSection is the part of docs/SCENARIOS.md about one tour: from its
// heading to the next heading of the same level.
func tourSection(t *testing.T, tour string) string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/SCENARIOS.md")
	require.NoError(t, err)
	head := "### `" + tour + "`"
	_, rest, ok := strings.Cut(string(doc), "\n"+head)
	require.True(t, ok, "docs/SCENARIOS.md has a section %q", head)
	if i := strings.Index(rest, "\n### "); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.Index(rest, "\n## "); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

// readTour reads the table of a tour's section.
func readTour(t *testing.T, section string) []tourRow {
	t.Helper()
	_, rest, ok := strings.Cut(section, "| the server sends | you send |")
	require.True(t, ok, "the section has a table of what to send")
	var rows []tourRow
	for _, line := range strings.Split(rest, "\n")[1:] {
		if strings.HasPrefix(line, "| ---") {
			continue
		}
		if !strings.HasPrefix(line, "| ") {
			break
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		require.Len(t, cells, 2, "%s", line)
		r := tourRow{row: line, fields: map[string]string{}}
		for i, m := range codeSpan.FindAllStringSubmatch(cells[0], -1) {
			if f := fieldPair.FindStringSubmatch(m[1]); i > 0 && f != nil {
				r.fields[f[1]] = f[2]
			} else if i == 0 {
				r.name = m[1]
			}
		}
		if q := quoted.FindStringSubmatch(codeSpan.ReplaceAllString(cells[0], "")); q != nil {
			r.text = q[1]
		}
		for _, m := range codeSpan.FindAllStringSubmatch(cells[1], -1) {
			if strings.HasPrefix(m[1], "{") {
				r.send = append(r.send, m[1])
			}
		}
		rows = append(rows, r)
	}
	require.GreaterOrEqual(t, len(rows), 3, "the tour's table")
	return rows
}

// lookup finds key in v breadth first: the frame's own fields before
// those of what it carries.
func lookup(v any, key string) (any, bool) {
	queue := []any{v}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		switch c := cur.(type) {
		case map[string]any:
			if x, ok := c[key]; ok {
				return x, true
			}
			for _, k := range sortedKeys(c) {
				queue = append(queue, c[k])
			}
		case []any:
			queue = append(queue, c...)
		}
	}
	return nil, false
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func (r tourRow) matches(f tourFrame) bool {
	if !slices.Contains(f.names, r.name) || r.text != "" && !strings.Contains(f.raw, r.text) {
		return false
	}
	for k, want := range r.fields {
		if v, ok := lookup(f.obj, k); !ok || strings.Trim(jsonText(v), `"`) != want {
			return false
		}
	}
	return true
}

// playTour follows a tour's table with c and returns the names of every
// frame the server sent.
func playTour(t *testing.T, ctx context.Context, c tourClient, rows []tourRow) map[string]bool {
	t.Helper()
	seen := map[string]bool{}
	for _, r := range rows {
		var got tourFrame
		if r.name != "" {
			for {
				f, err := c.next(ctx)
				require.NoError(t, err, "waiting for the frame of %s", r.row)
				t.Logf("%v %s", f.names, f.raw)
				for _, n := range f.names {
					seen[n] = true
				}
				if r.matches(f) {
					got = f
					break
				}
			}
		}
		for _, frame := range r.send {
			for _, m := range placeholder.FindAllStringSubmatch(frame, -1) {
				v, ok := lookup(got.obj, m[1])
				require.True(t, ok, "the frame of %s has no %s", r.row, m[1])
				frame = strings.ReplaceAll(frame, m[0], strings.Trim(jsonText(v), `"`))
			}
			require.NoError(t, c.send(ctx, frame), "%s", r.row)
		}
	}
	return seen
}

// checkTourCoverage asserts that the tour showed every frame type in
// want, but for those the page's section says it cannot produce (the
// keys of missing, each with why).
func checkTourCoverage(t *testing.T, section string, seen map[string]bool, want []string, missing map[string]string) {
	t.Helper()
	require.NotEmpty(t, want)
	for _, n := range want {
		if why, ok := missing[n]; ok {
			assert.Contains(t, section, "`"+n+"`", "the section says why the tour has no %s (%s)", n, why)
			assert.False(t, seen[n], "%s came: it is not missing", n)
			continue
		}
		assert.True(t, seen[n], "the tour sent no %s frame", n)
	}
}

// tourConfig is the server a tour test plays against: contract mode's
// settings, with the tour's scenario ("" for the built-in one, which holds
// every tour).
func tourConfig(t *testing.T, scenario string) config.Config {
	t.Helper()
	args := []string{"--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--workdir", t.TempDir(),
		"--llm", "scripted", "--scenario-pacing", "none", "--sandbox", "off", "--shutdown-grace", "1s"}
	if scenario != "" {
		args = append(args, "--scenario", scenario)
	}
	cfg, err := config.Parse(args, func(string) string { return "" }, io.Discard)
	require.NoError(t, err)
	return cfg
}

// eachScenario runs play against a server on the tour's own scenario and
// on the built-in one (contract mode's default).
func eachScenario(t *testing.T, tour string, play func(t *testing.T, ts *testServer)) {
	for _, scn := range []string{tour, ""} {
		name := scn
		if name == "" {
			name = "built-in"
		}
		t.Run(name, func(t *testing.T) { play(t, startServer(t, tourConfig(t, scn), Options{})) })
	}
}

// wsTour is a WebSocket tour client; kinds names a frame.
type wsTour struct {
	c     *websocket.Conn
	kinds func(obj map[string]any) []string
}

func dialTour(t *testing.T, ctx context.Context, url string, kinds func(map[string]any) []string) *wsTour {
	t.Helper()
	c, _, err := websocket.Dial(ctx, url, nil)
	require.NoError(t, err)
	c.SetReadLimit(16 << 20)
	t.Cleanup(func() { c.CloseNow() })
	return &wsTour{c: c, kinds: kinds}
}

func (w *wsTour) send(ctx context.Context, frame string) error {
	return w.c.Write(ctx, websocket.MessageText, []byte(frame))
}

func (w *wsTour) next(ctx context.Context) (tourFrame, error) {
	_, b, err := w.c.Read(ctx)
	if err != nil {
		return tourFrame{}, err
	}
	var obj map[string]any
	if err := json.Unmarshal(b, &obj); err != nil {
		return tourFrame{}, fmt.Errorf("%w: %s", err, b)
	}
	return tourFrame{names: w.kinds(obj), raw: string(b), obj: obj}, nil
}

// typeAnd names a frame by its type, and by the type of what it carries
// under key (a Loom run_stream_event's event, an AgentLoop item).
func typeAnd(key string) func(map[string]any) []string {
	return func(obj map[string]any) []string {
		names := []string{fmt.Sprint(obj["type"])}
		if inner, ok := obj[key].(map[string]any); ok {
			if typ, ok := inner["type"].(string); ok {
				names = append(names, typ)
			}
		}
		return names
	}
}

// sseTour is the threads client: each frame it sends is the body of a
// POST to one thread, whose event stream it then reads.
type sseTour struct {
	url    string
	stream *bufio.Reader
	body   io.Closer
}

func (s *sseTour) send(ctx context.Context, frame string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, strings.NewReader(frame))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return fmt.Errorf("POST %s: %s: %s", frame, resp.Status, b)
	}
	if s.body != nil {
		s.body.Close()
	}
	s.stream, s.body = bufio.NewReader(resp.Body), resp.Body
	return nil
}

func (s *sseTour) next(ctx context.Context) (tourFrame, error) {
	if s.stream == nil {
		return tourFrame{}, io.EOF
	}
	var name, data string
	var raw bytes.Buffer
	for {
		line, err := s.stream.ReadString('\n')
		if err != nil {
			return tourFrame{}, err
		}
		raw.WriteString(line)
		line = strings.TrimRight(line, "\r\n")
		switch {
		case strings.HasPrefix(line, "event:"):
			name = strings.TrimSpace(line[len("event:"):])
		case strings.HasPrefix(line, "data:"):
			data = strings.TrimSpace(line[len("data:"):])
		case line == "" && name != "":
			var d any
			if err := json.Unmarshal([]byte(data), &d); err != nil {
				return tourFrame{}, fmt.Errorf("%w: %s", err, raw.String())
			}
			return tourFrame{names: []string{name}, raw: raw.String(), obj: map[string]any{"event": name, "data": d}}, nil
		}
	}
}

// asyncSends lists the names of the messages an AsyncAPI document's
// sendServerMessages operation sends.
func asyncSends(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile("../../asyncapi/" + file)
	require.NoError(t, err)
	var doc struct {
		Channels map[string]struct {
			Messages map[string]struct {
				Ref string `yaml:"$ref"`
			} `yaml:"messages"`
		} `yaml:"channels"`
		Operations map[string]struct {
			Messages []struct {
				Ref string `yaml:"$ref"`
			} `yaml:"messages"`
		} `yaml:"operations"`
		Components struct {
			Messages map[string]struct {
				Name string `yaml:"name"`
			} `yaml:"messages"`
		} `yaml:"components"`
	}
	require.NoError(t, yaml.Unmarshal(b, &doc))
	var names []string
	for _, m := range doc.Operations["sendServerMessages"].Messages {
		parts := strings.Split(strings.TrimPrefix(m.Ref, "#/"), "/") // channels/X/messages/KEY
		require.Len(t, parts, 4, m.Ref)
		ref := doc.Channels[parts[1]].Messages[parts[3]].Ref
		msg, ok := doc.Components.Messages[strings.TrimPrefix(ref, "#/components/messages/")]
		require.True(t, ok, "%s: %s", file, ref)
		names = append(names, msg.Name)
	}
	return names
}

// oneOfTypes lists the `type` consts of the schemas a JSON schema's
// property prop is one of (Loom's events, AgentLoop's items).
func oneOfTypes(t *testing.T, dir, file, prop string) []string {
	t.Helper()
	read := func(name string) map[string]any {
		b, err := os.ReadFile("../../schemas/" + dir + "/" + name)
		require.NoError(t, err)
		var s map[string]any
		require.NoError(t, json.Unmarshal(b, &s))
		return s
	}
	p := read(file)["properties"].(map[string]any)[prop].(map[string]any)
	var names []string
	for _, alt := range p["oneOf"].([]any) {
		s := read(alt.(map[string]any)["$ref"].(string))
		typ := s["properties"].(map[string]any)["type"].(map[string]any)["const"].(string)
		names = append(names, typ)
	}
	return names
}

// tourContext bounds a tour: each takes well under a second, so a frame
// that never comes fails the test in good time.
func tourContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestAgentchatTourAsDocumented(t *testing.T) {
	section := tourSection(t, "agentchat-tour")
	rows := readTour(t, section)
	eachScenario(t, "agentchat-tour", func(t *testing.T, ts *testServer) {
		ctx := tourContext(t)
		c := dialTour(t, ctx, "ws://"+ts.Addr("main")+"/ws", typeAnd(""))
		seen := playTour(t, ctx, c, rows)
		checkTourCoverage(t, section, seen, asyncSends(t, "agentchat.yaml"), nil)
	})
}

func TestThreadsTourAsDocumented(t *testing.T) {
	section := tourSection(t, "threads-tour")
	rows := readTour(t, section)
	b, err := os.ReadFile("../../schemas/openapi/threads.yaml")
	require.NoError(t, err)
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Discriminator struct {
					Mapping map[string]string `yaml:"mapping"`
				} `yaml:"discriminator"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	require.NoError(t, yaml.Unmarshal(b, &doc))
	var events []string
	for name := range doc.Components.Schemas["StreamEvent"].Discriminator.Mapping {
		events = append(events, name)
	}
	slices.Sort(events)
	eachScenario(t, "threads-tour", func(t *testing.T, ts *testServer) {
		ctx := tourContext(t)
		c := &sseTour{url: "http://" + ts.Addr("main") + "/api/v1/threads/" + uuid.NewString()}
		t.Cleanup(func() {
			if c.body != nil {
				c.body.Close()
			}
		})
		seen := playTour(t, ctx, c, rows)
		checkTourCoverage(t, section, seen, events, nil)
	})
}

func TestLoomTourAsDocumented(t *testing.T) {
	section := tourSection(t, "loom-tour")
	rows := readTour(t, section)
	want := append(asyncSends(t, "loom.yaml"), oneOfTypes(t, "loom", "run_stream_event_response.json", "event")...)
	eachScenario(t, "loom-tour", func(t *testing.T, ts *testServer) {
		ctx := tourContext(t)
		c := dialTour(t, ctx, "ws://"+ts.Addr("main")+"/loom", typeAnd("event"))
		seen := playTour(t, ctx, c, rows)
		checkTourCoverage(t, section, seen, want, map[string]string{
			"run_start": "sent only with --loom-run-start: the original server sent none, and its client cannot decode it",
		})
	})
}

func TestAgentLoopTourAsDocumented(t *testing.T) {
	section := tourSection(t, "agentloop-tour")
	rows := readTour(t, section)
	want := append(asyncSends(t, "agentloop.yaml"), oneOfTypes(t, "agentloop", "response_item.json", "payload")...)
	eachScenario(t, "agentloop-tour", func(t *testing.T, ts *testServer) {
		ctx := tourContext(t)
		c := dialTour(t, ctx, "ws://"+ts.Addr("main")+"/agentloop", typeAnd("payload"))
		seen := playTour(t, ctx, c, rows)
		checkTourCoverage(t, section, seen, want, nil)
	})
}
