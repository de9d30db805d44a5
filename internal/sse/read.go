package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// DefaultMaxEventBytes is the largest event a Reader accepts unless told
// otherwise.
const DefaultMaxEventBytes = 1 << 20

// ErrEventTooLarge is returned when an event's lines exceed the Reader's
// limit. The stream cannot be read further.
var ErrEventTooLarge = errors.New("sse: event too large")

// Reader reads events from a text/event-stream. It implements the standard's
// interpretation rules: a leading byte order mark is skipped; lines end in
// CRLF, LF or CR; a line starting with ":" is a comment; "field: value"
// loses one space after the colon; a line without a colon is a field with an
// empty value; a blank line dispatches the event; unknown fields are
// ignored; an id containing NUL is ignored; a retry that is not all ASCII
// digits is ignored; an event without data is not dispatched; an event not
// ended by a blank line before the end of the stream is discarded. Invalid
// UTF-8 is replaced with U+FFFD.
//
// A Reader is not safe for concurrent use.
type Reader struct {
	r        *bufio.Reader
	max      int
	started  bool // the byte order mark check is done
	afterCR  bool // the previous line ended in CR: skip one LF
	lastID   string
	retry    time.Duration
	err      error // sticky
	line     []byte
	eventLen int
}

// NewReader returns a Reader that accepts events of up to
// DefaultMaxEventBytes.
func NewReader(r io.Reader) *Reader {
	return NewReaderSize(r, DefaultMaxEventBytes)
}

// NewReaderSize returns a Reader that accepts events whose lines total at
// most maxEventBytes bytes (comments included), so that a peer cannot make it
// buffer without bound.
func NewReaderSize(r io.Reader, maxEventBytes int) *Reader {
	if maxEventBytes <= 0 {
		maxEventBytes = DefaultMaxEventBytes
	}
	return &Reader{r: bufio.NewReader(r), max: maxEventBytes}
}

// LastEventID returns the stream's last event ID: the value a client sends
// as Last-Event-ID when it reconnects.
func (r *Reader) LastEventID() string { return r.lastID }

// SetLastEventID sets the last event ID a stream starts with: the one the
// client reconnected with, which an EventSource keeps until an event
// brings another.
func (r *Reader) SetLastEventID(id string) { r.lastID = id }

// Retry returns the reconnection time the stream last asked for, or 0 if it
// sent no valid retry field. Like the standard's, it takes effect even when
// the block holding it dispatches no event.
func (r *Reader) Retry() time.Duration { return r.retry }

// Next returns the next event. At the end of the stream it returns io.EOF;
// a stream that ends inside an event returns io.EOF too, as the standard
// discards such an event. Other errors come from the underlying reader or
// are ErrEventTooLarge. Once Next has returned an error it returns it again.
func (r *Reader) Next() (Event, error) {
	if r.err != nil {
		return Event{}, r.err
	}
	var (
		typ     string
		data    strings.Builder
		hasData bool
		retry   time.Duration
	)
	r.eventLen = 0
	for {
		line, err := r.readLine()
		if err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				err = io.EOF
			}
			r.err = err
			return Event{}, err
		}
		if len(line) == 0 {
			if !hasData {
				typ, retry = "", 0
				r.eventLen = 0
				continue
			}
			if typ == "" {
				typ = DefaultType
			}
			d := data.String()
			return Event{ID: r.lastID, Type: typ, Data: d[:len(d)-1], Retry: retry}, nil
		}
		if line[0] == ':' {
			continue
		}
		field, value := string(line), ""
		if i := strings.IndexByte(field, ':'); i >= 0 {
			field, value = field[:i], field[i+1:]
			value = strings.TrimPrefix(value, " ")
		}
		switch field {
		case "event":
			typ = value
		case "data":
			data.WriteString(value)
			data.WriteByte('\n')
			hasData = true
		case "id":
			if !strings.ContainsRune(value, 0) {
				r.lastID = value
			}
		case "retry":
			if d, ok := parseRetry(value); ok {
				retry, r.retry = d, d
			}
		}
	}
}

// parseRetry parses a retry value: ASCII digits only, in milliseconds.
func parseRetry(v string) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return 0, false
		}
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms > int64(math.MaxInt64/time.Millisecond) {
		return 0, false // too large for a time.Duration
	}
	return time.Duration(ms) * time.Millisecond, true
}

// readLine returns the next line without its end, as valid UTF-8. A final
// line that the stream ends without terminating is reported as
// io.ErrUnexpectedEOF, since it cannot complete an event. It takes what is
// buffered up to the line's end at once rather than byte by byte.
func (r *Reader) readLine() (string, error) {
	r.line = r.line[:0]
	for {
		buf, err := r.r.Peek(1)
		if err != nil {
			if errors.Is(err, io.EOF) {
				if len(r.line) > 0 {
					return "", io.ErrUnexpectedEOF
				}
				return "", io.EOF
			}
			return "", err
		}
		if !r.started {
			r.started = true
			if buf[0] == 0xEF {
				if bom, err := r.r.Peek(3); err == nil && bom[1] == 0xBB && bom[2] == 0xBF {
					_, _ = r.r.Discard(3)
					continue
				}
			}
		}
		if r.afterCR {
			r.afterCR = false
			if buf[0] == '\n' {
				_, _ = r.r.Discard(1)
				continue
			}
		}
		buf, _ = r.r.Peek(r.r.Buffered())
		end := bytes.IndexByte(buf, '\n')
		if end < 0 {
			end = len(buf)
		}
		if cr := bytes.IndexByte(buf[:end], '\r'); cr >= 0 {
			end = cr
		}
		if r.eventLen+end > r.max {
			return "", fmt.Errorf("%w: more than %d bytes", ErrEventTooLarge, r.max)
		}
		r.eventLen += end
		r.line = append(r.line, buf[:end]...)
		if end == len(buf) {
			_, _ = r.r.Discard(end)
			continue
		}
		r.afterCR = buf[end] == '\r'
		_, _ = r.r.Discard(end + 1)
		return toValidUTF8(r.line), nil
	}
}

func toValidUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}
