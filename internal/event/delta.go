package event

// Delta is what the three kinds of delta (MessageDelta, ReasoningDelta,
// ToolCallDelta) have in common: a chunk of one stream's text. Stream is
// the message, reasoning block or tool call id; Offset is where Text
// begins in the stream's whole text, in bytes. Offsets let a consumer that
// was sent a stream's text ahead of its commit (Event.Preview) tell which
// bytes of a committed delta it has already shown. Deltas written before
// offsets existed all have Offset zero; they never have previews.
type Delta struct {
	Stream string
	Text   string
	Offset int64
}

// AsDelta returns p as a Delta, or false when p is no delta.
func AsDelta(p Payload) (Delta, bool) {
	switch p := p.(type) {
	case MessageDelta:
		return Delta{p.MessageID, p.Text, p.Offset}, true
	case ReasoningDelta:
		return Delta{p.ReasoningID, p.Text, p.Offset}, true
	case ToolCallDelta:
		return Delta{p.CallID, p.ArgumentsDelta, p.Offset}, true
	}
	return Delta{}, false
}

// WithText returns the delta p (one of the three kinds) carrying text at
// offset instead of its own; any other payload is returned as it is.
func WithText(p Payload, text string, offset int64) Payload {
	switch p := p.(type) {
	case MessageDelta:
		p.Text, p.Offset = text, offset
		return p
	case ReasoningDelta:
		p.Text, p.Offset = text, offset
		return p
	case ToolCallDelta:
		p.ArgumentsDelta, p.Offset = text, offset
		return p
	}
	return p
}
