package protocol

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/agentwire/agentwire/internal/event"
)

// Deltas is one consumer's place in the delta stream it is showing, for
// consumers that take previews (bus.WantPreviews): a preview shows a
// stream's text before its commit, and the committed delta that follows
// carries that text again, often with more. Show passes each delta
// through it and gets back only the text not shown yet, so every byte of
// a stream reaches the client once, whichever way it came first.
//
// Only one stream is ever ahead of the log: a run previews a delta only
// when every event it emitted before is committed or is a previewed delta
// of the same stream, so a consumer has had the committed end of one
// stream before previews of the next begin.
type Deltas struct {
	marks     []string // ids of previewed events that are not deltas, not yet committed
	stream    string
	shown     int64 // bytes of stream shown, from its start
	committed int64 // bytes of stream shown that the consumer had committed
	ahead     bool  // previews of stream were shown
}

// Show returns the part of e's delta not shown yet, with show false when
// nothing of it is left to show (a repeat, or a preview that would leave a
// hole because an earlier one was missed) and cut true when that part is
// not the whole delta. Events that are not deltas are returned whole, and
// shown unless they are the commit of one previewed before.
func (d *Deltas) Show(e event.Event) (out event.Event, show, cut bool) {
	delta, ok := event.AsDelta(e.Payload)
	if !ok {
		return e, d.mark(e), false
	}
	if e.Preview != 0 {
		switch {
		case delta.Stream == d.stream && delta.Offset == d.shown:
		case delta.Stream != d.stream && delta.Offset == 0:
			d.stream, d.committed = delta.Stream, 0
		default:
			return e, false, false // missed part of the stream: its commit brings it
		}
		d.shown = delta.Offset + int64(len(delta.Text))
		d.ahead = true
		return e, true, false
	}
	end := delta.Offset + int64(len(delta.Text))
	if delta.Stream != d.stream || !d.ahead {
		d.stream, d.shown, d.committed, d.ahead = delta.Stream, end, end, false
		return e, true, false
	}
	d.committed = max(d.committed, end)
	if end <= d.shown {
		return e, false, false
	}
	if skip := d.shown - delta.Offset; skip > 0 {
		e.Payload = event.WithText(e.Payload, delta.Text[skip:], d.shown)
		cut = true
	}
	d.shown = end
	return e, true, cut
}

// maxMarks bounds the previewed marks remembered: a run previews one or
// two before their commit, and a preview whose commit never comes (the
// server died) must not be remembered for ever.
const maxMarks = 16

// mark reports whether e, an event that is not a delta, is to be shown:
// a preview of one (a mark: an event that starts a message or a call and
// goes out ahead of its commit) is, and remembered; its commit, known by
// its id, is not.
func (d *Deltas) mark(e event.Event) bool {
	if e.Preview != 0 {
		if len(d.marks) == maxMarks {
			d.marks = d.marks[1:]
		}
		d.marks = append(d.marks, e.ID)
		return true
	}
	for i, id := range d.marks {
		if id == e.ID {
			d.marks = append(d.marks[:i], d.marks[i+1:]...)
			return false
		}
	}
	return true
}

// Ahead reports the stream and its bytes the consumer has shown beyond
// what it had committed: what a resume position must add to the seq of
// the last committed event (Position). It is false when the consumer is
// not ahead of the log.
func (d *Deltas) Ahead() (stream string, shown int64, ok bool) {
	if !d.ahead || d.shown <= d.committed {
		return "", 0, false
	}
	return d.stream, d.shown, true
}

// Position is a resume position: the seq of the last committed event a
// client had, and, when it was shown a stream ahead of the log, that
// stream and how many of its bytes. Its text form is "seq", or
// "seq:stream:bytes" when ahead.
type Position struct {
	Seq    int64
	Stream string
	Shown  int64
}

// Position returns the consumer's resume position after the committed
// event of seq seq.
func (d *Deltas) Position(seq int64) Position {
	p := Position{Seq: seq}
	if stream, shown, ok := d.Ahead(); ok {
		p.Stream, p.Shown = stream, shown
	}
	return p
}

func (p Position) String() string {
	if p.Stream == "" {
		return strconv.FormatInt(p.Seq, 10)
	}
	return strconv.FormatInt(p.Seq, 10) + ":" + p.Stream + ":" + strconv.FormatInt(p.Shown, 10)
}

// ParsePosition parses a Position's text form.
func ParsePosition(s string) (Position, error) {
	seq, rest, ahead := strings.Cut(s, ":")
	n, err := strconv.ParseInt(seq, 10, 64)
	if err != nil || n < 0 {
		return Position{}, fmt.Errorf("%q is not a position: want a seq, or seq:stream:bytes", s)
	}
	p := Position{Seq: n}
	if !ahead {
		return p, nil
	}
	stream, shown, ok := strings.Cut(rest, ":")
	b, err := strconv.ParseInt(shown, 10, 64)
	if !ok || stream == "" || err != nil || b <= 0 {
		return Position{}, fmt.Errorf("%q is not a position: want a seq, or seq:stream:bytes", s)
	}
	p.Stream, p.Shown = stream, b
	return p, nil
}

// Resume returns the Deltas of a consumer that starts at p: the bytes of
// p's stream up to p.Shown count as shown.
func (p Position) Resume() Deltas {
	if p.Stream == "" {
		return Deltas{}
	}
	return Deltas{stream: p.Stream, shown: p.Shown, ahead: true}
}
