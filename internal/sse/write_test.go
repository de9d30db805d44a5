package sse

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var writeCases = []struct {
	name string
	e    Event
	want string
}{
	{name: "document example", e: Event{Type: "agent_text", Data: `{"chunk":"I'll "}`},
		want: "event: agent_text\ndata: {\"chunk\":\"I'll \"}\n\n"},
	{name: "id", e: Event{ID: "42", Type: "done", Data: "{}"}, want: "id: 42\nevent: done\ndata: {}\n\n"},
	{name: "no type", e: Event{Data: "x"}, want: "data: x\n\n"},
	{name: "empty data", e: Event{Type: "t"}, want: "event: t\ndata: \n\n"},
	{name: "multi-line data", e: Event{Data: "a\nb\r\nc\rd\n"}, want: "data: a\ndata: b\ndata: c\ndata: d\ndata: \n\n"},
	{name: "leading space kept", e: Event{Data: " x"}, want: "data:  x\n\n"},
	{name: "retry", e: Event{Data: "x", Retry: 1500 * time.Millisecond}, want: "retry: 1500\ndata: x\n\n"},
}

func TestWriterEvent(t *testing.T) {
	for _, tc := range writeCases {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			require.NoError(t, NewWriter(&b).Event(tc.e))
			require.Equal(t, tc.want, b.String())

			got, err := readAll(NewReader(strings.NewReader(b.String())))
			require.NoError(t, err)
			want := tc.e
			want.Data = strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(want.Data)
			if want.Type == "" {
				want.Type = DefaultType
			}
			require.Equal(t, []Event{want}, got, "read back %q", b.String())
		})
	}
}

func TestWriterResetsID(t *testing.T) {
	var b strings.Builder
	w := NewWriter(&b)
	require.NoError(t, w.Event(Event{Data: "a"}))
	require.NoError(t, w.Event(Event{ID: "1", Data: "b"}))
	require.NoError(t, w.Event(Event{Data: "c"}))
	require.NoError(t, w.Event(Event{Data: "d"}))
	require.Equal(t, "data: a\n\nid: 1\ndata: b\n\nid: \ndata: c\n\ndata: d\n\n", b.String())
}

func TestWriterRejectsBadFields(t *testing.T) {
	for _, e := range []Event{{ID: "1\n2"}, {ID: "1\r"}, {ID: "a\x00"}, {Type: "a\nb"}, {Type: "a\r"}} {
		var b strings.Builder
		err := NewWriter(&b).Event(e)
		require.ErrorIs(t, err, ErrInvalidField, "Event(%+v)", e)
		require.Empty(t, b.String(), "nothing is written for %+v", e)
	}
}

func TestWriterComment(t *testing.T) {
	var b strings.Builder
	w := NewWriter(&b)
	require.NoError(t, w.Comment("ping"))
	require.NoError(t, w.Event(Event{Type: "done", Data: "{}"}))
	require.NoError(t, w.Comment("two\nlines"))
	require.Equal(t, ": ping\n\nevent: done\ndata: {}\n\n: two\n: lines\n\n", b.String())

	got, err := readAll(NewReader(strings.NewReader(b.String())))
	require.NoError(t, err)
	require.Equal(t, []Event{{Type: "done", Data: "{}"}}, got)
}

// countingWriter records each Write call.
type countingWriter struct{ writes []string }

func (c *countingWriter) Write(p []byte) (int, error) {
	c.writes = append(c.writes, string(p))
	return len(p), nil
}

func TestWriterOneWritePerCall(t *testing.T) {
	var c countingWriter
	w := NewWriter(&c)
	require.NoError(t, w.Event(Event{ID: "1", Type: "t", Data: "a\nb"}))
	require.NoError(t, w.Comment("ping"))
	require.Equal(t, []string{"id: 1\nevent: t\ndata: a\ndata: b\n\n", ": ping\n\n"}, c.writes)
}

type failingWriter struct{}

var errWrite = errors.New("write failed")

func (failingWriter) Write([]byte) (int, error) { return 0, errWrite }

func TestWriterReturnsWriteErrors(t *testing.T) {
	w := NewWriter(failingWriter{})
	require.ErrorIs(t, w.Event(Event{Data: "x"}), errWrite)
	require.ErrorIs(t, w.Comment("x"), errWrite)
}

// TestFrame: an event encoded once and written as a Frame reads the same
// as one written with Event, to a fresh writer and after others; a frame
// without an id written after an event with one clears the id, as Event
// does.
func TestFrame(t *testing.T) {
	for _, tc := range writeCases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Encode(tc.e)
			require.NoError(t, err)
			require.Equal(t, tc.e, f.Event())
			require.Equal(t, tc.want, string(f.Bytes()))
			var framed, plain strings.Builder
			fw, pw := NewWriter(&framed), NewWriter(&plain)
			for _, e := range []Event{{ID: "7", Data: "before"}, tc.e, {Data: "after"}} {
				require.NoError(t, pw.Event(e))
				f, err := Encode(e)
				require.NoError(t, err)
				require.NoError(t, fw.Frame(f))
			}
			require.Equal(t, plain.String(), framed.String())
		})
	}
	_, err := Encode(Event{ID: "1\n"})
	require.ErrorIs(t, err, ErrInvalidField)
}
