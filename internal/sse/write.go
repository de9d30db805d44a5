package sse

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Writer writes events and comments to a text/event-stream. Each call
// makes exactly one Write to the underlying writer, so an event is never
// interleaved with another; flushing it to the network is the caller's job
// (http.ResponseController.Flush).
//
// A Writer is not safe for concurrent use.
type Writer struct {
	w      io.Writer
	buf    []byte
	lastID string // the id readers hold after what was written so far
}

// NewWriter returns a Writer that writes to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// ErrInvalidField is returned for an id or event type that cannot be sent:
// one containing CR or LF (which would end the field early), or an id
// containing NUL (which readers ignore).
var ErrInvalidField = errors.New("sse: invalid field")

// Event writes e: its id when not empty (and an empty id field when e.ID is
// empty but an earlier event set one, since readers keep the last id), its
// type when not empty, its retry
// when positive, then one data field per line of e.Data (split at CRLF, LF
// and CR, so that a reader joins them back with "\n"), then a blank line.
func (w *Writer) Event(e Event) error {
	b, err := appendEvent(w.buf[:0], e, w.lastID != "")
	if err != nil {
		return err
	}
	w.buf = b
	if _, err := w.w.Write(b); err != nil {
		return err
	}
	w.lastID = e.ID
	return nil
}

// Frame is an event encoded once, to be written to many streams
// (Writer.Frame) without encoding it for each.
type Frame struct {
	e Event
	b []byte
}

// Encode encodes e as a Frame; it fails as Writer.Event would.
func Encode(e Event) (Frame, error) {
	b, err := appendEvent(nil, e, false)
	if err != nil {
		return Frame{}, err
	}
	return Frame{e: e, b: b}, nil
}

// Event is the event f encodes.
func (f Frame) Event() Event { return f.e }

// Bytes is f's encoding. It is shared: do not modify it.
func (f Frame) Bytes() []byte { return f.b }

// Frame writes f as Event(f.Event()) would, with one Write of its encoding.
func (w *Writer) Frame(f Frame) error {
	if f.e.ID == "" && w.lastID != "" {
		// This writer must clear the id its readers hold.
		return w.Event(f.e)
	}
	if _, err := w.w.Write(f.b); err != nil {
		return err
	}
	w.lastID = f.e.ID
	return nil
}

// appendEvent appends e's encoding to b; clearID asks for an empty id
// field when e has no id.
func appendEvent(b []byte, e Event, clearID bool) ([]byte, error) {
	if strings.ContainsAny(e.ID, "\r\n\x00") {
		return b, fmt.Errorf("%w: id %q", ErrInvalidField, e.ID)
	}
	if strings.ContainsAny(e.Type, "\r\n") {
		return b, fmt.Errorf("%w: event %q", ErrInvalidField, e.Type)
	}
	if e.ID != "" || clearID {
		b = append(b, "id: "...)
		b = append(b, e.ID...)
		b = append(b, '\n')
	}
	if e.Type != "" {
		b = append(b, "event: "...)
		b = append(b, e.Type...)
		b = append(b, '\n')
	}
	if e.Retry > 0 {
		b = append(b, "retry: "...)
		b = strconv.AppendInt(b, int64(e.Retry/time.Millisecond), 10)
		b = append(b, '\n')
	}
	b = appendLines(b, "data: ", e.Data)
	return append(b, '\n'), nil
}

// Comment writes text as a comment block (one ":" line per line of text,
// then a blank line). Readers ignore it; servers send it as a heartbeat
// (Comment("ping") writes ": ping") to keep idle connections open.
func (w *Writer) Comment(text string) error {
	b := appendLines(w.buf[:0], ": ", text)
	b = append(b, '\n')
	w.buf = b
	_, err := w.w.Write(b)
	return err
}

// appendLines appends one field line per line of s (split at CRLF, LF and
// CR; an empty s is one empty line), each prefix, the line and LF.
func appendLines(b []byte, prefix, s string) []byte {
	for {
		i := strings.IndexAny(s, "\r\n")
		line := s
		if i >= 0 {
			line = s[:i]
		}
		b = append(b, prefix...)
		b = append(b, line...)
		b = append(b, '\n')
		if i < 0 {
			return b
		}
		if s[i] == '\r' && i+1 < len(s) && s[i+1] == '\n' {
			i++
		}
		s = s[i+1:]
	}
}
