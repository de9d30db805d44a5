package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/config"
)

// tourStep is a row of the AG2 tour's table in docs/PROTOCOLS.md: the
// frame the server sends (its type and what else the row names of it),
// and the frames to send then.
type tourStep struct {
	row    string
	typ    string            // "" for the first row: send at once
	text   string            // a quoted prompt the frame holds, "" for none
	fields map[string]string // field: value pairs the row names
	others []string          // other names the frame holds (a component)
	send   []string
}

var (
	codeSpan  = regexp.MustCompile("`([^`]+)`")
	quoted    = regexp.MustCompile(`"([^"]+?)(?: …)?"`)
	fieldPair = regexp.MustCompile(`^([a-z_]+): (.+)$`)
)

// readTourTable reads the table of what to send at each step of the AG2
// tour.
func readTourTable(t *testing.T) []tourStep {
	t.Helper()
	doc, err := os.ReadFile("../../docs/PROTOCOLS.md")
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(doc), "What to send at each step")
	require.True(t, ok, "docs/PROTOCOLS.md has the AG2 tour's steps")
	var steps []tourStep
	for _, line := range strings.Split(rest, "\n") {
		if steps != nil && !strings.HasPrefix(line, "|") {
			break
		}
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| the server sends") || strings.HasPrefix(line, "| ---") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		require.Len(t, cells, 2, "%s", line)
		st := tourStep{row: line, fields: map[string]string{}}
		for i, m := range codeSpan.FindAllStringSubmatch(cells[0], -1) {
			switch f := fieldPair.FindStringSubmatch(m[1]); {
			case i == 0:
				st.typ = m[1]
			case f != nil:
				st.fields[f[1]] = f[2]
			default:
				st.others = append(st.others, m[1])
			}
		}
		if q := quoted.FindStringSubmatch(codeSpan.ReplaceAllString(cells[0], "")); q != nil {
			st.text = q[1]
		}
		for _, m := range codeSpan.FindAllStringSubmatch(cells[1], -1) {
			if strings.HasPrefix(m[1], "{") {
				st.send = append(st.send, m[1])
			}
		}
		steps = append(steps, st)
	}
	require.GreaterOrEqual(t, len(steps), 6, "the tour's table")
	return steps
}

// matches reports whether f, an AG2 frame, is the one step waits for.
func (st tourStep) matches(f map[string]any, raw string) bool {
	if f["type"] != st.typ || st.text != "" && !strings.Contains(raw, st.text) {
		return false
	}
	data, _ := f["data"].(map[string]any)
	for k, want := range st.fields {
		if v, ok := data[k]; !ok || strings.Trim(jsonText(v), `"`) != want {
			return false
		}
	}
	for _, o := range st.others {
		if !strings.Contains(raw, o) {
			return false
		}
	}
	return true
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestAG2TourAsDocumented follows the AG2 tour the way docs/PROTOCOLS.md
// tells a person to, row by row: it waits for each frame the table names
// and sends exactly what the table says, with the frame's request_id and
// corr in place of the placeholders. The tour must end, every answer be
// taken, and the resume at the end replay it.
func TestAG2TourAsDocumented(t *testing.T) {
	steps := readTourTable(t)
	cfg, err := config.Parse([]string{"--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--workdir", t.TempDir()},
		func(string) string { return "" }, io.Discard)
	require.NoError(t, err)
	ts := startServer(t, cfg, Options{})

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws://"+ts.Addr("main")+"/ws/default/acme/"+uuid.NewString()+"/alice", nil)
	require.NoError(t, err)
	defer ws.CloseNow()
	ws.SetReadLimit(16 << 20)

	var errs []string
	seen := map[string]bool{}
	for _, st := range steps {
		var got map[string]any
		if st.typ != "" {
			for got == nil {
				_, b, err := ws.Read(ctx)
				require.NoError(t, err, "waiting for the frame of %s", st.row)
				var f map[string]any
				require.NoError(t, json.Unmarshal(b, &f))
				seen[fmt.Sprint(f["type"])] = true
				if f["type"] == "chat.error" {
					errs = append(errs, string(b))
				}
				if st.matches(f, string(b)) {
					got = f
				}
			}
		}
		data, _ := got["data"].(map[string]any)
		for _, frame := range st.send {
			for _, key := range []string{"request_id", "corr"} {
				if v, ok := data[key].(string); ok {
					frame = strings.ReplaceAll(frame, "<"+key+">", v)
				}
			}
			require.NotContains(t, frame, "<", "the frame names the placeholder it needs: %s", st.row)
			require.NoError(t, ws.Write(ctx, websocket.MessageText, []byte(frame)))
		}
	}
	// The last row's resume replays the tour and ends with the boundary.
	for {
		_, b, err := ws.Read(ctx)
		require.NoError(t, err, "waiting for chat.resume_boundary")
		var f map[string]any
		require.NoError(t, json.Unmarshal(b, &f))
		seen[fmt.Sprint(f["type"])] = true
		if f["type"] == "chat.resume_boundary" {
			break
		}
	}
	doc, err := os.ReadFile("../../docs/PROTOCOLS.md")
	require.NoError(t, err)
	_, section, _ := strings.Cut(string(doc), "### Contract testing with no model: `ag2-tour`")
	section, _, _ = strings.Cut(section, "\n## ")
	checkTourCoverage(t, section, seen, asyncSends(t, "ag2.yaml"), map[string]string{})
	for _, e := range errs {
		// The tour's failing tool is the one error it shows.
		assert.Contains(t, e, "TOOL_EXECUTION_ERROR", "an answer the table gives was refused")
	}
}
