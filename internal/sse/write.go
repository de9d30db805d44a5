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
	if strings.ContainsAny(e.ID, "\r\n\x00") {
		return fmt.Errorf("%w: id %q", ErrInvalidField, e.ID)
	}
	if strings.ContainsAny(e.Type, "\r\n") {
		return fmt.Errorf("%w: event %q", ErrInvalidField, e.Type)
	}
	b := w.buf[:0]
	if e.ID != "" || w.lastID != "" {
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
	for _, line := range splitLines(e.Data) {
		b = append(b, "data: "...)
		b = append(b, line...)
		b = append(b, '\n')
	}
	b = append(b, '\n')
	w.buf = b
	if _, err := w.w.Write(b); err != nil {
		return err
	}
	w.lastID = e.ID
	return nil
}

// Comment writes text as a comment block (one ":" line per line of text,
// then a blank line). Readers ignore it; servers send it as a heartbeat
// (Comment("ping") writes ": ping") to keep idle connections open.
func (w *Writer) Comment(text string) error {
	b := w.buf[:0]
	for _, line := range splitLines(text) {
		b = append(b, ": "...)
		b = append(b, line...)
		b = append(b, '\n')
	}
	b = append(b, '\n')
	w.buf = b
	_, err := w.w.Write(b)
	return err
}

// splitLines splits s at CRLF, LF and CR. It returns one empty line for an
// empty s, since an event always has at least one data field.
func splitLines(s string) []string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	return strings.Split(s, "\n")
}
