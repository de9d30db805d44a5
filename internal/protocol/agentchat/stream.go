package agentchat

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/protocol"
)

// How a socket receives the agent's text (--agentchat-stream, ?stream=).
const (
	// StreamMessage sends one agent_message per finished message, when it
	// is finished: the document's shape, and the default.
	StreamMessage = "message"
	// StreamChunks sends each model text chunk as its own agent_message as
	// soon as it is delivered, and nothing more when the message ends: the
	// frames of a message concatenate to its text.
	StreamChunks = "chunks"
)

// streamParam reads the ?stream= of an upgrade request: whether the socket
// streams chunks, def (the server's --agentchat-stream) when the query has
// none.
func streamParam(q url.Values, def string) (chunks bool, err error) {
	vs, ok := q["stream"]
	switch {
	case !ok:
		return def == StreamChunks, nil
	case len(vs) > 1:
		return false, errors.New("stream is given more than once: give it once, message or chunks")
	case vs[0] == "":
		return false, fmt.Errorf("stream is empty: want message or chunks, or leave it out for the server's default (%s)", orMessage(def))
	}
	switch vs[0] {
	case StreamMessage:
		return false, nil
	case StreamChunks:
		return true, nil
	}
	return false, fmt.Errorf("stream %q: want message or chunks", vs[0])
}

func orMessage(mode string) string {
	if mode == "" {
		return StreamMessage
	}
	return mode
}

// texts is what a watcher remembers of the agent messages of its thread
// that are in progress, for its chunks sockets: each message's text so
// far, and how much of it each socket has been sent. A socket is sent the
// part of the text it has not had yet whenever the text grows, so a socket
// that meets a message in the middle (it joined the session then, or came
// back to it) gets everything before that point as one frame, then the
// chunks: what one socket receives of a message always concatenates to the
// message's text, once. A message whose text is white space so far sends
// nothing yet, as message mode sends nothing for a blank message.
//
// Only the watcher's goroutine uses it.
type texts struct {
	open map[string]*openText // by message id
}

// openText is one message in progress.
type openText struct {
	run  string
	text strings.Builder
	// known is false for a message that began before the watcher started
	// following: text lacks what was streamed before, until resolve reads
	// it from the log (only when a chunks socket needs it).
	known    bool
	firstSeq int64 // the seq of the first delta seen, while !known
	shown    bool  // the text has something besides white space
	sent     map[*client]int
}

func newTexts() *texts { return &texts{open: map[string]*openText{}} }

// start records a message that begins: its text is known from its start.
func (t *texts) start(run, id string) {
	t.open[id] = &openText{run: run, known: true, sent: map[*client]int{}}
}

// delta adds a chunk to its message and returns the message.
func (t *texts) delta(run string, seq int64, p event.MessageDelta) *openText {
	m := t.open[p.MessageID]
	if m == nil {
		m = &openText{run: run, firstSeq: seq, sent: map[*client]int{}}
		t.open[p.MessageID] = m
	}
	m.text.WriteString(p.Text)
	m.shown = m.shown || strings.TrimSpace(p.Text) != ""
	return m
}

// known reports whether message id is open and known from its start.
func (t *texts) known(id string) bool {
	m := t.open[id]
	return m != nil && m.known
}

// take forgets a message that is complete and returns what was known of it
// (nil when nothing was).
func (t *texts) take(id string) *openText {
	m := t.open[id]
	delete(t.open, id)
	return m
}

// endRun forgets the messages of a run that ended: none should be open,
// but the memory must not outlive the run if one is.
func (t *texts) endRun(run string) {
	for id, m := range t.open {
		if m.run == run {
			delete(t.open, id)
		}
	}
}

// resolve puts in front of m's text what the thread's log holds of message
// id before the first delta the watcher saw, so that a socket can be sent
// the message from its start.
func (m *openText) resolve(ctx context.Context, core protocol.Core, thread, id string) error {
	if m.known {
		return nil
	}
	m.known = true
	prefix, err := readBack(ctx, core, thread, id, m.firstSeq)
	if err != nil {
		return err
	}
	if prefix != "" {
		rest := m.text.String()
		m.text.Reset()
		m.text.WriteString(prefix)
		m.text.WriteString(rest)
		m.shown = m.shown || strings.TrimSpace(prefix) != ""
	}
	return nil
}

// unsent returns the text cl has not been sent yet and counts it as sent.
func (m *openText) unsent(cl *client) string {
	if !m.shown {
		return ""
	}
	s := m.text.String()
	from := m.sent[cl]
	m.sent[cl] = len(s)
	return s[from:]
}

// rest returns what cl still lacks of the finished message text, given
// what it was sent of m (m may be nil); ok is false when what it was sent
// is not the start of text (the log lost part of the message), so nothing
// more can be sent without repeating or garbling it.
func (m *openText) rest(cl *client, text string) (string, bool) {
	if strings.TrimSpace(text) == "" {
		return "", true
	}
	if m == nil {
		return text, true
	}
	n := m.sent[cl]
	if n > len(text) || !strings.HasPrefix(text, m.text.String()[:n]) {
		return "", false
	}
	return text[n:], true
}

// readBackPage is how many events readBack reads at a time.
const readBackPage = 256

// readBack returns the text of message id streamed before seq before: its
// deltas, read backwards from there to its message.started.
func readBack(ctx context.Context, core protocol.Core, thread, id string, before int64) (string, error) {
	var parts []string // newest first
	for hi := before - 1; hi > 0; {
		lo := max(0, hi-readBackPage)
		evs, err := core.Read(ctx, thread, lo, int(hi-lo))
		if err != nil {
			return "", err
		}
		if len(evs) == 0 {
			break
		}
		for _, e := range slices.Backward(evs) {
			switch p := e.Payload.(type) {
			case event.MessageDelta:
				if p.MessageID == id {
					parts = append(parts, p.Text)
				}
			case event.MessageStarted:
				if p.MessageID == id {
					slices.Reverse(parts)
					return strings.Join(parts, ""), nil
				}
			}
		}
		hi = evs[0].Seq - 1
	}
	return "", fmt.Errorf("message %s has no message.started before seq %d", id, before)
}
