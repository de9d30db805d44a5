package logs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/logs"
)

func TestJSONLinesCarryTheContextsIDs(t *testing.T) {
	var out bytes.Buffer
	log, err := logs.New(&out, "json", slog.LevelInfo)
	require.NoError(t, err)

	conn := logs.With(context.Background(), "conn", "01CONN")
	run := logs.With(conn, slog.String("thread", "t1"), "run", "r1")
	log.InfoContext(conn, "accepted")
	log.With("protocol", "loom").WarnContext(run, "slow", "n", 3)
	log.Info("no context")
	log.DebugContext(run, "below the level")

	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 3)
	var got []map[string]any
	for _, l := range lines {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m), l)
		delete(m, "time")
		got = append(got, m)
	}
	assert.Equal(t, map[string]any{"level": "INFO", "msg": "accepted", "conn": "01CONN"}, got[0])
	assert.Equal(t, map[string]any{"level": "WARN", "msg": "slow", "protocol": "loom", "n": 3.0, "conn": "01CONN", "thread": "t1", "run": "r1"}, got[1])
	assert.Equal(t, map[string]any{"level": "INFO", "msg": "no context"}, got[2])
}

func TestTextFormatAndRefusals(t *testing.T) {
	var out bytes.Buffer
	log, err := logs.New(&out, "text", logs.ParseLevel("warn"))
	require.NoError(t, err)
	log.InfoContext(logs.With(context.Background(), "conn", "c1"), "hidden")
	log.WarnContext(logs.With(context.Background(), "conn", "c1"), "shown")
	assert.NotContains(t, out.String(), "hidden")
	assert.Contains(t, out.String(), `msg=shown conn=c1`)

	_, err = logs.New(&out, "xml", slog.LevelInfo)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"xml"`)
	assert.Contains(t, err.Error(), "text or json")
}
