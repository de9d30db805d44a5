package event

import (
	"strconv"
	"unicode/utf8"
)

// appendMessageDelta appends d's storage encoding to b: the bytes
// json.Marshal writes for it (FuzzEncodeMessageDelta holds that), without
// its reflection. Deltas are most of a log's events.
func appendMessageDelta(b []byte, d MessageDelta) []byte {
	b = append(b, `{"message_id":`...)
	b = appendString(b, d.MessageID)
	b = append(b, `,"text":`...)
	b = appendString(b, d.Text)
	if d.Offset != 0 {
		b = append(b, `,"offset":`...)
		b = strconv.AppendInt(b, d.Offset, 10)
	}
	return append(b, '}')
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string, escaped as encoding/json
// escapes it: quotes, backslashes and control characters; <, > and & (its
// HTML-safe default); U+2028 and U+2029; and each byte of invalid UTF-8
// as U+FFFD.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
