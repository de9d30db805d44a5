package event

import (
	"strconv"

	jsonwire "github.com/agentwire/agentwire/internal/wire"
)

// appendMessageDelta appends d's storage encoding to b: the bytes
// json.Marshal writes for it (FuzzEncodeMessageDelta holds that), without
// its reflection. Deltas are most of a log's events.
func appendMessageDelta(b []byte, d MessageDelta) []byte {
	b = append(b, `{"message_id":`...)
	b = jsonwire.AppendString(b, d.MessageID)
	b = append(b, `,"text":`...)
	b = jsonwire.AppendString(b, d.Text)
	if d.Offset != 0 {
		b = append(b, `,"offset":`...)
		b = strconv.AppendInt(b, d.Offset, 10)
	}
	return append(b, '}')
}
