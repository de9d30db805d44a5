// Package sse reads and writes Server-Sent Events streams
// (text/event-stream) as the WHATWG HTML standard defines them
// (https://html.spec.whatwg.org/multipage/server-sent-events.html).
//
// Servers write events with a Writer and flush the response themselves;
// clients read events with a Reader. The package knows nothing about what
// the data means: protocols decode it.
package sse

import "time"

// Event is one dispatched Server-Sent Event.
type Event struct {
	// ID is the stream's last event ID when the event was dispatched: the
	// value of the most recent id field, which persists across events until
	// another id field changes it. Writers send it only when it is not empty.
	ID string
	// Type is the event's name (the event field). Readers report "message"
	// when the event had none; writers omit it when it is empty.
	Type string
	// Data is the event's data: the values of its data fields joined with
	// "\n".
	Data string
	// Retry, when positive, is the reconnection time the server asks for.
	// Readers report it on the event whose block held the retry field;
	// writers send it when it is positive (in whole milliseconds).
	Retry time.Duration
}

// DefaultType is the type of an event that names none.
const DefaultType = "message"
