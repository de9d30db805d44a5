package sse

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/require"
)

var readCases = []struct {
	name   string
	in     string
	want   []Event
	lastID string
}{
	{name: "empty stream", in: ""},
	{name: "event and data", in: "event: agent_text\ndata: {\"chunk\":\"hi\"}\n\n",
		want: []Event{{Type: "agent_text", Data: `{"chunk":"hi"}`}}},
	{name: "default type", in: "data: x\n\n", want: []Event{{Type: "message", Data: "x"}}},
	{name: "data lines joined with LF", in: "data: a\ndata: b\ndata:\ndata: c\n\n",
		want: []Event{{Type: "message", Data: "a\nb\n\nc"}}},
	{name: "one leading space removed", in: "data:  two spaces\ndata:none\n\n",
		want: []Event{{Type: "message", Data: " two spaces\nnone"}}},
	{name: "field without colon", in: "data\ndata\n\n", want: []Event{{Type: "message", Data: "\n"}}},
	{name: "event without colon is empty type", in: "event: x\nevent\ndata: d\n\n",
		want: []Event{{Type: "message", Data: "d"}}},
	{name: "colon in value kept", in: "data: a: b:c\n\n", want: []Event{{Type: "message", Data: "a: b:c"}}},
	{name: "CRLF", in: "event: e\r\ndata: d\r\n\r\n", want: []Event{{Type: "e", Data: "d"}}},
	{name: "CR", in: "event: e\rdata: d\r\r", want: []Event{{Type: "e", Data: "d"}}},
	{name: "mixed line ends", in: "data: a\r\ndata: b\rdata: c\n\r\n", want: []Event{{Type: "message", Data: "a\nb\nc"}}},
	{name: "LF CR is two line ends", in: "data: a\n\r", want: []Event{{Type: "message", Data: "a"}}},
	{name: "BOM skipped", in: "\ufeffdata: a\n\n", want: []Event{{Type: "message", Data: "a"}}},
	{name: "only the first BOM skipped", in: "\ufeff\ufeffdata: a\n\ndata: b\n\n",
		want: []Event{{Type: "message", Data: "b"}}},
	{name: "comments ignored", in: ": ping\n\n:\ndata: a\n: mid\n\n: ping\n\n",
		want: []Event{{Type: "message", Data: "a"}}},
	{name: "unknown fields ignored", in: "foo: bar\nData: no\ndata: a\n\n",
		want: []Event{{Type: "message", Data: "a"}}},
	{name: "block without data not dispatched", in: "event: done\n\ndata: a\n\n",
		want: []Event{{Type: "message", Data: "a"}}},
	{name: "id persists", in: "id: 1\ndata: a\n\ndata: b\n\nid: 2\ndata: c\n\n",
		want:   []Event{{ID: "1", Type: "message", Data: "a"}, {ID: "1", Type: "message", Data: "b"}, {ID: "2", Type: "message", Data: "c"}},
		lastID: "2"},
	{name: "empty id resets", in: "id: 1\ndata: a\n\nid\ndata: b\n\n",
		want: []Event{{ID: "1", Type: "message", Data: "a"}, {Type: "message", Data: "b"}}},
	{name: "id with NUL ignored", in: "id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n",
		want: []Event{{ID: "1", Type: "message", Data: "a"}, {ID: "1", Type: "message", Data: "b"}}, lastID: "1"},
	{name: "id without data still counts", in: "id: 7\n\ndata: a\n\n",
		want: []Event{{ID: "7", Type: "message", Data: "a"}}, lastID: "7"},
	{name: "retry", in: "retry: 2500\ndata: a\n\nretry: 1x\ndata: b\n\nretry: -1\nretry\ndata: c\n\n",
		want: []Event{{Type: "message", Data: "a", Retry: 2500 * time.Millisecond}, {Type: "message", Data: "b"}, {Type: "message", Data: "c"}}},
	{name: "unterminated event discarded", in: "data: a\n\ndata: b\n", want: []Event{{Type: "message", Data: "a"}}},
	{name: "unterminated line discarded", in: "data: a\n\ndata: b", want: []Event{{Type: "message", Data: "a"}}},
	{name: "invalid UTF-8 replaced", in: "data: a\xffb\n\n", want: []Event{{Type: "message", Data: "a\uFFFDb"}}},
	{name: "mojibake kept", in: "data: 72Â°F\n\n", want: []Event{{Type: "message", Data: "72Â°F"}}},
}

func readAll(r *Reader) ([]Event, error) {
	var out []Event
	for {
		e, err := r.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return out, err
		}
		out = append(out, e)
	}
}

func TestReader(t *testing.T) {
	for _, tc := range readCases {
		t.Run(tc.name, func(t *testing.T) {
			for _, mode := range []struct {
				name string
				wrap func(io.Reader) io.Reader
			}{
				{"whole", func(r io.Reader) io.Reader { return r }},
				{"one byte", iotest.OneByteReader},
				{"half", iotest.HalfReader},
			} {
				r := NewReader(mode.wrap(strings.NewReader(tc.in)))
				got, err := readAll(r)
				require.NoError(t, err, "%s: Next(%q)", mode.name, tc.in)
				require.Equal(t, tc.want, got, "%s: events of %q", mode.name, tc.in)
				require.Equal(t, tc.lastID, r.LastEventID(), "%s: LastEventID after %q", mode.name, tc.in)
			}
		})
	}
}

func TestReaderRetryWithoutEvent(t *testing.T) {
	r := NewReader(strings.NewReader("retry: 10\n\n"))
	_, err := r.Next()
	require.ErrorIs(t, err, io.EOF)
	require.Equal(t, 10*time.Millisecond, r.Retry())
}

// blockingReader yields its bytes, then fails as a network read that would
// block forever would hang: a Reader must dispatch an event without reading
// past the line end that completes it.
type blockingReader struct{ r io.Reader }

var errWouldBlock = errors.New("read past the end of the event")

func (b blockingReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if errors.Is(err, io.EOF) {
		return n, errWouldBlock
	}
	return n, err
}

func TestReaderDispatchesWithoutReadAhead(t *testing.T) {
	for _, in := range []string{"data: a\r\r", "data: a\n\n", "data: a\r\n\r\n", "data: a\r\n\r"} {
		r := NewReader(blockingReader{strings.NewReader(in)})
		e, err := r.Next()
		require.NoError(t, err, "Next(%q)", in)
		require.Equal(t, "a", e.Data)
		_, err = r.Next()
		require.ErrorIs(t, err, errWouldBlock, "second Next(%q)", in)
	}
}

func TestReaderEventTooLarge(t *testing.T) {
	in := "data: " + strings.Repeat("x", 100) + "\n\n"
	r := NewReaderSize(strings.NewReader(in+in), 200)
	_, err := r.Next()
	require.NoError(t, err)
	_, err = r.Next()
	require.NoError(t, err, "the limit applies per event")

	r = NewReaderSize(strings.NewReader("data: "+strings.Repeat("x", 300)+"\n\n"), 200)
	_, err = r.Next()
	require.ErrorIs(t, err, ErrEventTooLarge)
	_, err = r.Next()
	require.ErrorIs(t, err, ErrEventTooLarge, "errors are sticky")

	r = NewReaderSize(strings.NewReader(strings.Repeat(": ping\n", 100)), 200)
	_, err = r.Next()
	require.ErrorIs(t, err, ErrEventTooLarge, "comments without a blank line count")
}

func TestReaderPropagatesReadErrors(t *testing.T) {
	boom := errors.New("boom")
	r := NewReader(io.MultiReader(strings.NewReader("data: a\n\ndata: b\n"), iotest.ErrReader(boom)))
	e, err := r.Next()
	require.NoError(t, err)
	require.Equal(t, "a", e.Data)
	_, err = r.Next()
	require.ErrorIs(t, err, boom)
}

func FuzzReader(f *testing.F) {
	for _, tc := range readCases {
		f.Add([]byte(tc.in))
	}
	for _, tc := range writeCases {
		f.Add([]byte(tc.want))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		events, err := readAll(NewReaderSize(strings.NewReader(string(in)), 1<<16))
		if err != nil && !errors.Is(err, ErrEventTooLarge) {
			t.Fatalf("Next(%q) = %v", in, err)
		}
		// Whatever was read writes back and reads again unchanged.
		var b strings.Builder
		w := NewWriter(&b)
		for _, e := range events {
			if err := w.Event(e); err != nil {
				t.Fatalf("Event(%+v) = %v for input %q", e, err, in)
			}
		}
		again, err := readAll(NewReader(strings.NewReader(b.String())))
		if err != nil {
			t.Fatalf("Next(%q) = %v (rewritten from %q)", b.String(), err, in)
		}
		if len(again) != len(events) {
			t.Fatalf("read %d events from %q, %d from its rewrite %q", len(events), in, len(again), b.String())
		}
		for i := range events {
			if events[i] != again[i] {
				t.Fatalf("event %d of %q = %+v, rewritten %+v", i, in, events[i], again[i])
			}
		}
	})
}
