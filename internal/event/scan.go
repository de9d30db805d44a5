package event

import (
	"reflect"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// scanner is the fast path's JSON reader (decode.go): just what the
// flat objects EncodePayload writes need, giving up on anything else.

// maxShared is the size up to which a payload's strings share its memory.
const maxShared = 4 << 10

// scanner reads JSON from s at i.
type scanner struct {
	s     string
	i     int
	clone bool // copy strings out of s
}

func (d *scanner) space() {
	for d.i < len(d.s) {
		switch d.s[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// next skips space and then c, if c is next.
func (d *scanner) next(c byte) bool {
	d.space()
	if d.i < len(d.s) && d.s[d.i] == c {
		d.i++
		return true
	}
	return false
}

// open reads the start of an object and reports whether a member follows.
func (d *scanner) open() (more, ok bool) {
	if !d.next('{') {
		return false, false
	}
	return !d.next('}'), true
}

// more reads what follows an object member and reports whether another
// one does.
func (d *scanner) more() (more, ok bool) {
	if d.next(',') {
		return true, true
	}
	return false, d.next('}')
}

// end reports whether only space is left.
func (d *scanner) end() bool {
	d.space()
	return d.i == len(d.s)
}

// peek skips space and returns the next byte (0 at the end).
func (d *scanner) peek() byte {
	d.space()
	if d.i < len(d.s) {
		return d.s[d.i]
	}
	return 0
}

// literal reads word (true, false, null) if it is next.
func (d *scanner) literal(word string) bool {
	if strings.HasPrefix(d.s[d.i:], word) {
		d.i += len(word)
		return true
	}
	return false
}

// key reads an object key: a string without escapes.
func (d *scanner) key() (string, bool) {
	if d.peek() != '"' {
		return "", false
	}
	end := strings.IndexByte(d.s[d.i+1:], '"')
	if end < 0 {
		return "", false
	}
	k := d.s[d.i+1 : d.i+1+end]
	if strings.IndexByte(k, '\\') >= 0 {
		return "", false
	}
	d.i += end + 2
	return k, true
}

// str reads a string; d.s[d.i] is its opening quote.
func (d *scanner) str() (string, bool) {
	start := d.i + 1
	escaped := false
	for i := start; ; {
		for end := min(i+16, len(d.s)); i < end && plain[d.s[i]]; {
			i++
		}
		if i < len(d.s) && plain[d.s[i]] {
			i = plainRun(d.s, i) // a long run: faster eight bytes at a time
		}
		if i >= len(d.s) {
			return "", false
		}
		switch d.s[i] {
		case '"':
			d.i = i + 1
			text := d.s[start:i]
			if escaped {
				return unescape(text)
			}
			if d.clone {
				text = strings.Clone(text)
			}
			return text, utf8.ValidString(text)
		case '\\':
			escaped = true
			i += 2 // the escaped byte may be a quote
		default: // a control character
			return "", false
		}
	}
}

// plainRun returns the index of the first byte of s from i on that is not
// plain (len(s) if none is). It looks at eight bytes at a time while none
// of them can be a quote, a backslash or a control character.
func plainRun(s string, i int) int {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	for ; i+8 <= len(s); i += 8 {
		x := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		q, b := x^(ones*'"'), x^(ones*'\\')
		// The high bit of a byte is set here if that byte of q or b is
		// zero, or that byte of x is below 0x20 (and, after a byte that
		// is, sometimes for the bytes above it too: only ever too many).
		if ((q-ones)&^q|(b-ones)&^b|(x-ones*0x20)&^x)&highs != 0 {
			break
		}
	}
	for i < len(s) && plain[s[i]] {
		i++
	}
	return i
}

// plain marks the bytes a string holds as they are: all but quotes,
// backslashes and control characters.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// unescape decodes the text of a string with escapes.
func unescape(text string) (string, bool) {
	var b strings.Builder
	b.Grow(len(text)) // no escape is shorter than what it stands for
	for {
		i := strings.IndexByte(text, '\\')
		if i < 0 {
			b.WriteString(text)
			break
		}
		b.WriteString(text[:i])
		if i+1 == len(text) {
			return "", false
		}
		switch e := text[i+1]; e {
		case '"', '\\', '/':
			b.WriteByte(e)
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			if i+6 > len(text) {
				return "", false
			}
			r, err := strconv.ParseUint(text[i+2:i+6], 16, 16)
			if err != nil || utf16.IsSurrogate(rune(r)) {
				return "", false // surrogates: encoding/json pairs them or replaces them
			}
			b.WriteRune(rune(r))
			text = text[i+6:]
			continue
		default:
			return "", false
		}
		text = text[i+2:]
	}
	s := b.String()
	return s, utf8.ValidString(s)
}

// number reads a JSON number and returns its text.
func (d *scanner) number() (string, bool) {
	start := d.i
	if d.i < len(d.s) && d.s[d.i] == '-' {
		d.i++
	}
	switch {
	case d.i < len(d.s) && d.s[d.i] == '0':
		d.i++
	case d.digits() == 0:
		return "", false
	}
	if d.i < len(d.s) && d.s[d.i] == '.' {
		d.i++
		if d.digits() == 0 {
			return "", false
		}
	}
	if d.i < len(d.s) && (d.s[d.i] == 'e' || d.s[d.i] == 'E') {
		d.i++
		if d.i < len(d.s) && (d.s[d.i] == '+' || d.s[d.i] == '-') {
			d.i++
		}
		if d.digits() == 0 {
			return "", false
		}
	}
	return d.s[start:d.i], true
}

func (d *scanner) digits() int {
	n := 0
	for d.i < len(d.s) && d.s[d.i] >= '0' && d.s[d.i] <= '9' {
		d.i++
		n++
	}
	return n
}

// skip reads any JSON value and returns its text.
func (d *scanner) skip(depth int) (string, bool) {
	if depth > maxDepth {
		return "", false
	}
	c := d.peek()
	start := d.i
	ok := false
	switch c {
	case '"':
		ok = d.skipString()
	case '{':
		d.i++
		if ok = d.next('}'); ok {
			break
		}
		for {
			if d.peek() != '"' {
				return "", false
			}
			if !d.skipString() || !d.next(':') {
				return "", false
			}
			if _, ok = d.skip(depth + 1); !ok {
				return "", false
			}
			if d.next(',') {
				continue
			}
			ok = d.next('}')
			break
		}
	case '[':
		d.i++
		if ok = d.next(']'); ok {
			break
		}
		for {
			if _, ok = d.skip(depth + 1); !ok {
				return "", false
			}
			if d.next(',') {
				continue
			}
			ok = d.next(']')
			break
		}
	case 't':
		ok = d.literal("true")
	case 'f':
		ok = d.literal("false")
	case 'n':
		ok = d.literal("null")
	default:
		_, ok = d.number()
	}
	return d.s[start:d.i], ok
}

// maxDepth bounds the nesting the fast path reads in a raw field; deeper
// values go to encoding/json (which has its own limit).
const maxDepth = 512

// skipString reads a string without decoding it: valid escapes, no control
// characters, any other bytes.
func (d *scanner) skipString() bool {
	d.i++
	for d.i < len(d.s) {
		c := d.s[d.i]
		switch {
		case c == '"':
			d.i++
			return true
		case c < 0x20:
			return false
		case c == '\\':
			if d.i+1 == len(d.s) {
				return false
			}
			switch d.s[d.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				d.i += 2
			case 'u':
				if d.i+6 > len(d.s) {
					return false
				}
				for _, h := range []byte(d.s[d.i+2 : d.i+6]) {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return false
					}
				}
				d.i += 6
			default:
				return false
			}
		default:
			d.i++
		}
	}
	return false
}

// scalar reads the value of a field of a scalar kind into v.
func (d *scanner) scalar(v reflect.Value, kind fieldKind) bool {
	c := d.peek()
	if c == 'n' {
		return d.literal("null") // encoding/json leaves the value as it was
	}
	switch kind {
	case kindString:
		if c != '"' {
			return false
		}
		s, ok := d.str()
		if ok {
			v.SetString(s)
		}
		return ok
	case kindInt:
		n, ok := d.int()
		if !ok || v.OverflowInt(n) {
			return false
		}
		v.SetInt(n)
		return true
	case kindFloat:
		f, ok := d.float()
		if ok {
			v.SetFloat(f)
		}
		return ok
	case kindBool:
		switch {
		case d.literal("true"):
			v.SetBool(true)
		case d.literal("false"):
			v.SetBool(false)
		default:
			return false
		}
		return true
	}
	return false
}

// value reads the value of a field of kind into v.
func (d *scanner) value(v reflect.Value, kind fieldKind) bool {
	if kind <= kindBool {
		return d.scalar(v, kind)
	}
	c := d.peek()
	if kind == kindRaw {
		raw, ok := d.skip(0)
		if ok {
			v.SetBytes([]byte(raw))
		}
		return ok
	}
	if c == 'n' {
		if !d.literal("null") {
			return false
		}
		v.SetZero() // encoding/json: null empties pointers and slices
		return true
	}
	switch kind {
	case kindIntPtr:
		n, ok := d.int()
		if !ok {
			return false
		}
		p := reflect.New(v.Type().Elem())
		if p.Elem().OverflowInt(n) {
			return false
		}
		p.Elem().SetInt(n)
		v.Set(p)
		return true
	case kindStrings:
		var ss []string
		ok := d.array(func() bool {
			if d.peek() != '"' {
				return false
			}
			s, ok := d.str()
			ss = append(ss, s)
			return ok
		})
		if ok {
			v.Set(reflect.ValueOf(nonNil(ss)))
		}
		return ok
	case kindFloats:
		var fs []float64
		ok := d.array(func() bool {
			f, ok := d.float()
			fs = append(fs, f)
			return ok
		})
		if ok {
			v.Set(reflect.ValueOf(nonNil(fs)))
		}
		return ok
	case kindPairs:
		var ps [][2]string
		ok := d.array(func() bool {
			var p [2]string
			i := 0
			ok := d.array(func() bool {
				if i == len(p) || d.peek() != '"' {
					return false
				}
				var ok bool
				p[i], ok = d.str()
				i++
				return ok
			})
			ps = append(ps, p)
			return ok && i == len(p)
		})
		if ok {
			v.Set(reflect.ValueOf(nonNil(ps)))
		}
		return ok
	}
	return false
}

// int reads a number as an int64.
func (d *scanner) int() (int64, bool) {
	text, ok := d.number()
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(text, 10, 64)
	return n, err == nil
}

// float reads a number as a float64.
func (d *scanner) float() (float64, bool) {
	d.space()
	text, ok := d.number()
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(text, 64)
	return f, err == nil
}

// array reads an array, calling elem for each element.
func (d *scanner) array(elem func() bool) bool {
	if !d.next('[') {
		return false
	}
	if d.next(']') {
		return true
	}
	for {
		d.space()
		if !elem() {
			return false
		}
		if d.next(',') {
			continue
		}
		return d.next(']')
	}
}

// nonNil returns s, or an empty slice for nil: encoding/json decodes [] to
// an empty slice, not nil.
func nonNil[S ~[]E, E any](s S) S {
	if s == nil {
		return S{}
	}
	return s
}
