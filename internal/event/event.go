// Package event defines agentwire's canonical event vocabulary: the one
// protocol-free record of what happened in a thread. Every agent run appends
// events to its thread's log; every wire protocol is a projection of that log.
//
// An Event carries a typed Payload in memory; the store keeps the payload as
// JSON beside its Type. Encode and Decode are the one JSON encoding used for
// storage and for the bus.
package event

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
)

// Event is one committed (or about to be committed) entry of a thread's log.
type Event struct {
	// Thread is the thread id. Threads are strings; protocols that need a
	// UUID (threads REST+SSE) use UUID strings.
	Thread string
	// Seq is the event's position in its thread, gapless from 1. The store
	// assigns it on append; it is zero before then.
	Seq int64
	// ID is a ULID unique across all threads.
	ID string
	// Run is the id of the run that produced the event; empty for events
	// outside any run (for example a user message queued between runs).
	Run string
	// Time is when the event was created, in UTC.
	Time time.Time
	// Payload is the typed body; its EventType is the event's type.
	Payload Payload
	// Preview, when not zero, marks a delta sent to live subscribers ahead
	// of its commit (Seq is zero): it belongs after the thread's event of
	// seq Preview. Its text reaches the log later, in a delta of the same
	// stream that may carry more (Delta's offsets tell the overlap), or,
	// if the server stops first, not at all. Previews are never stored.
	Preview int64
}

// Type reports the event's type, taken from its payload.
func (e Event) Type() Type {
	if e.Payload == nil {
		return ""
	}
	return e.Payload.EventType()
}

// New returns an event for thread and run with a fresh ULID and the current
// time. Seq stays zero until the store appends it.
func New(thread, run string, p Payload) Event {
	return Event{Thread: thread, ID: NewID(), Run: run, Time: time.Now().UTC(), Payload: p}
}

var (
	entropyMu sync.Mutex
	entropy   = ulid.Monotonic(rand.Reader, 0)
)

// NewID returns a new ULID string. ULIDs sort by creation time, so ids of
// runs, messages and events order the way they were made.
func NewID() string {
	entropyMu.Lock()
	defer entropyMu.Unlock()
	return ulid.MustNew(ulid.Timestamp(time.Now()), entropy).String()
}

// EncodePayload returns the storage encoding of p.
func EncodePayload(p Payload) ([]byte, error) {
	switch p := p.(type) {
	case nil:
		return nil, fmt.Errorf("event: nil payload")
	case MessageDelta:
		return appendMessageDelta(make([]byte, 0, 32+len(p.MessageID)+len(p.Text)), p), nil
	}
	return json.Marshal(p)
}

// DecodePayload decodes data, stored under type t, into its typed payload.
func DecodePayload(t Type, data []byte) (Payload, error) {
	// One copy of the whole payload: its strings are slices of it.
	return DecodePayloadString(t, string(data))
}

// DecodePayloadString is DecodePayload for data held in a string. The
// payload's strings may share data's memory (that of a payload of a few KiB
// at most), so a store that reads payloads as strings copies each once, not
// once per field.
func DecodePayloadString(t Type, data string) (Payload, error) {
	dec, ok := registry[t]
	if !ok {
		return nil, fmt.Errorf("event: unknown type %q", t)
	}
	if dec.fast != nil {
		if p, ok := dec.fast(data); ok {
			return p, nil
		}
	}
	p, err := dec.json([]byte(data))
	if err != nil {
		return nil, fmt.Errorf("event: decode %s: %w", t, err)
	}
	return p, nil
}

// wire is the JSON form of a whole event, used on the bus and in tests.
type wire struct {
	Thread string          `json:"thread"`
	Seq    int64           `json:"seq"`
	ID     string          `json:"id"`
	Run    string          `json:"run,omitempty"`
	Time   time.Time       `json:"time"`
	Type   Type            `json:"type"`
	Data   json.RawMessage `json:"data"`
}

// MarshalJSON encodes the event with its type and payload.
func (e Event) MarshalJSON() ([]byte, error) {
	data, err := EncodePayload(e.Payload)
	if err != nil {
		return nil, err
	}
	return json.Marshal(wire{Thread: e.Thread, Seq: e.Seq, ID: e.ID, Run: e.Run, Time: e.Time, Type: e.Type(), Data: data})
}

// UnmarshalJSON decodes an event encoded by MarshalJSON.
func (e *Event) UnmarshalJSON(b []byte) error {
	var w wire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	p, err := DecodePayload(w.Type, w.Data)
	if err != nil {
		return err
	}
	*e = Event{Thread: w.Thread, Seq: w.Seq, ID: w.ID, Run: w.Run, Time: w.Time, Payload: p}
	return nil
}
