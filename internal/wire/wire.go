// Package wire is the small runtime behind the generated protocol packages
// (generated/*api): it parses a frame once and checks it against the
// constraints the schema documents state, reporting the first violation as
// an *Error that says what kind of violation it is, in which message and
// where (a JSON Pointer). Generated validators call these functions;
// protocol adapters turn an *Error into their protocol's own error frame
// from its fields, never from its text. The generated encoders write JSON
// with its Append functions (encode.go), byte for byte as encoding/json.
package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

// The size limits of every protocol, in one place:
//
//   - MaxFrameBytes is the largest frame or request body a decoder accepts;
//     a larger one gets the protocol's own error (a frame "exceeds" error,
//     a 400), and a WebSocket stays open.
//   - MaxReadBytes is the largest WebSocket frame read at all; a larger one
//     closes the socket with 1009 "message too big".
const (
	MaxFrameBytes = 1 << 20
	MaxReadBytes  = 4 << 20
)

// Kind says what kind of violation an Error is.
type Kind uint8

// The kinds of Error.
const (
	// KindInternal, the zero Kind, is a failure the schema does not
	// explain: a value the validators accepted that the Go types could not
	// take, so the document and the generated code disagree.
	KindInternal Kind = iota
	// KindSyntax: the frame is not JSON, is empty, has data after its
	// value, or is too large.
	KindSyntax
	// KindUnknownType: the frame's "type" names no message of the protocol
	// (Error.Message holds that value).
	KindUnknownType
	// KindRequired: a required member is missing.
	KindRequired
	// KindType: a value has the wrong JSON type.
	KindType
	// KindValue: a value breaks a const, enum, pattern, format, length,
	// range, item count or discriminator constraint.
	KindValue
	// KindNotAllowed: a member that a closed schema does not declare.
	KindNotAllowed
)

var kindNames = [...]string{
	KindInternal:    "internal",
	KindSyntax:      "syntax",
	KindUnknownType: "unknown_type",
	KindRequired:    "required",
	KindType:        "type",
	KindValue:       "value",
	KindNotAllowed:  "not_allowed",
}

// String returns the kind's name, e.g. "required" or "unknown_type".
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Error is a frame that does not match its schema.
type Error struct {
	// Kind says what is wrong, for code that reacts to it.
	Kind Kind
	// Message is the frame's message type (its "type" member, e.g. "chat")
	// once the decoder knows it; for KindUnknownType it is the unknown
	// value. Decoders of documents without a type member may set it to
	// what names the message instead (the threads adapter: the SSE event
	// name) or leave it empty.
	Message string
	// Path is a JSON Pointer (RFC 6901) to the offending value; "" is the
	// whole frame.
	Path string
	// Reason says what is wrong, for people, e.g. "is required" or "must be
	// string".
	Reason string
}

// Error returns Path and Reason, as "/path: reason" or, for the whole
// frame, "reason".
func (e *Error) Error() string {
	if e.Path == "" {
		return e.Reason
	}
	return e.Path + ": " + e.Reason
}

// AsError returns err's *Error, if it has one.
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// WithMessage sets the message type of err, when it is an *Error that has
// none yet, and returns err. Generated decoders call it once a frame's type
// is known.
func WithMessage(err error, message string) error {
	if e, ok := AsError(err); ok && e.Message == "" {
		e.Message = message
	}
	return err
}

func fail(kind Kind, path, format string, args ...any) *Error {
	return &Error{Kind: kind, Path: path, Reason: fmt.Sprintf(format, args...)}
}

// ErrUnimplemented is matched (with errors.Is) by every *UnimplementedError.
var ErrUnimplemented = errors.New("message not implemented")

// UnimplementedError is what the generated UnimplementedHandler answers to
// a message its embedder does not handle.
type UnimplementedError struct {
	// Message is the message type, e.g. "chat".
	Message string
}

func (e *UnimplementedError) Error() string {
	return fmt.Sprintf("message type %q is not implemented", e.Message)
}

// Is reports whether target is ErrUnimplemented.
func (e *UnimplementedError) Is(target error) bool { return target == ErrUnimplemented }

// Parse decodes a whole frame into plain JSON values (map[string]any,
// []any, json.Number, string, bool, nil).
func Parse(frame []byte) (any, error) {
	if len(frame) > MaxFrameBytes {
		return nil, fail(KindSyntax, "", "frame exceeds %d bytes", MaxFrameBytes)
	}
	d := json.NewDecoder(bytes.NewReader(frame))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fail(KindSyntax, "", "invalid JSON: empty frame")
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fail(KindSyntax, "", "invalid JSON: unexpected end of input")
		}
		return nil, fail(KindSyntax, "", "invalid JSON: %v", err)
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return nil, fail(KindSyntax, "", "invalid JSON: data after the top-level value")
	}
	return v, nil
}

// MessageType checks that a parsed frame is an object with a string "type"
// and returns it.
func MessageType(v any) (string, error) {
	o, ok := v.(map[string]any)
	if !ok {
		return "", fail(KindType, "", "must be object")
	}
	t, ok := o["type"]
	if !ok {
		return "", fail(KindRequired, "/type", "is required")
	}
	s, ok := t.(string)
	if !ok {
		return "", fail(KindType, "/type", "must be string")
	}
	return s, nil
}

// UnknownType is the error for a frame whose type no message has.
func UnknownType(t string) error {
	e := fail(KindUnknownType, "/type", "unknown message type %q", t)
	e.Message = t
	return e
}

// Field returns the path of property name (already escaped) under p.
func Field(p, name string) string { return p + "/" + name }

// Index returns the path of item i under p.
func Index(p string, i int) string { return p + "/" + strconv.Itoa(i) }

// Escape escapes a property name for use in a JSON Pointer.
func Escape(name string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(name)
}

func typeError(p, want string, nullable bool) *Error {
	if nullable {
		return fail(KindType, p, "must be %s or null", want)
	}
	return fail(KindType, p, "must be %s", want)
}

// Object checks v is an object (or null, when nullable; then it returns nil).
func Object(p string, v any, nullable bool) (map[string]any, error) {
	if v == nil && nullable {
		return nil, nil
	}
	o, ok := v.(map[string]any)
	if !ok {
		return nil, typeError(p, "object", nullable)
	}
	return o, nil
}

// Array checks v is an array.
func Array(p string, v any, nullable bool) ([]any, bool, error) {
	if v == nil && nullable {
		return nil, true, nil
	}
	a, ok := v.([]any)
	if !ok {
		return nil, false, typeError(p, "array", nullable)
	}
	return a, false, nil
}

// String checks v is a string.
func String(p string, v any, nullable bool) (string, bool, error) {
	if v == nil && nullable {
		return "", true, nil
	}
	s, ok := v.(string)
	if !ok {
		return "", false, typeError(p, "string", nullable)
	}
	return s, false, nil
}

// Bool checks v is a boolean.
func Bool(p string, v any, nullable bool) error {
	if v == nil && nullable {
		return nil
	}
	if _, ok := v.(bool); !ok {
		return typeError(p, "boolean", nullable)
	}
	return nil
}

// Number checks v is a number.
func Number(p string, v any, nullable bool) (float64, bool, error) {
	if v == nil && nullable {
		return 0, true, nil
	}
	n, ok := v.(json.Number)
	if !ok {
		return 0, false, typeError(p, "number", nullable)
	}
	f, err := n.Float64()
	if err != nil || math.IsInf(f, 0) {
		return 0, false, fail(KindValue, p, "must be a finite number")
	}
	return f, false, nil
}

// Integer checks v is an integer that fits in 64 bits, written without a
// fraction or exponent.
func Integer(p string, v any, nullable bool) (float64, bool, error) {
	if v == nil && nullable {
		return 0, true, nil
	}
	n, ok := v.(json.Number)
	if !ok {
		return 0, false, typeError(p, "integer", nullable)
	}
	i, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil {
		return 0, false, typeError(p, "integer", nullable)
	}
	return float64(i), false, nil
}

// Required checks that every name is a property of o.
func Required(p string, o map[string]any, names ...string) error {
	for _, n := range names {
		if _, ok := o[n]; !ok {
			return fail(KindRequired, Field(p, Escape(n)), "is required")
		}
	}
	return nil
}

// Others returns the properties of o outside known, sorted: the members an
// additionalProperties schema checks.
func Others(o map[string]any, known ...string) []string {
	var out []string
	for k := range o {
		found := false
		for _, n := range known {
			if k == n {
				found = true
				break
			}
		}
		if !found {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// Closed checks that o has no property outside allowed.
func Closed(p string, o map[string]any, allowed ...string) error {
	if len(o) == 0 {
		return nil
	}
	var extra []string
	for k := range o {
		found := false
		for _, a := range allowed {
			if k == a {
				found = true
				break
			}
		}
		if !found {
			extra = append(extra, k)
		}
	}
	if len(extra) == 0 {
		return nil
	}
	sort.Strings(extra)
	return fail(KindNotAllowed, Field(p, Escape(extra[0])), "is not allowed")
}

// Equal reports whether a parsed JSON value equals a schema constant.
func Equal(v, want any) bool {
	switch w := want.(type) {
	case float64:
		n, ok := v.(json.Number)
		if !ok {
			return false
		}
		f, err := n.Float64()
		return err == nil && f == w
	case string, bool, nil:
		return v == want
	}
	// Objects and arrays: compare their canonical encodings.
	a, err1 := json.Marshal(v)
	b, err2 := json.Marshal(want)
	return err1 == nil && err2 == nil && bytes.Equal(a, b)
}

// Const checks v equals want; display is want as the error shows it.
func Const(p string, v, want any, display string) error {
	if !Equal(v, want) {
		return fail(KindValue, p, "must be %s", display)
	}
	return nil
}

// Enum checks v is one of allowed; display lists them for the error.
func Enum(p string, v any, allowed []any, display string) error {
	for _, a := range allowed {
		if Equal(v, a) {
			return nil
		}
	}
	return fail(KindValue, p, "must be one of %s", display)
}

// MinLength checks s has at least n characters (Unicode code points).
func MinLength(p, s string, n int) error {
	if utf8.RuneCountInString(s) < n {
		return fail(KindValue, p, "must be at least %d characters", n)
	}
	return nil
}

// MaxLength checks s has at most n characters.
func MaxLength(p, s string, n int) error {
	if utf8.RuneCountInString(s) > n {
		return fail(KindValue, p, "must be at most %d characters", n)
	}
	return nil
}

// Pattern checks s matches re.
func Pattern(p, s string, re *regexp.Regexp) error {
	if !re.MatchString(s) {
		return fail(KindValue, p, "must match pattern %s", re)
	}
	return nil
}

// Format checks s has the named format (uuid, date-time or uri).
func Format(p, s, format string) error {
	ok := true
	switch format {
	case "uuid":
		_, err := uuid.Parse(s)
		ok = err == nil && len(s) == 36
	case "date-time":
		_, err := time.Parse(time.RFC3339Nano, s)
		ok = err == nil
	case "uri":
		u, err := url.Parse(s)
		ok = err == nil && u.Scheme != ""
	}
	if !ok {
		return fail(KindValue, p, "must be a valid %s", format)
	}
	return nil
}

// Minimum checks x >= min.
func Minimum(p string, x, min float64) error {
	if x < min {
		return fail(KindValue, p, "must be >= %s", num(min))
	}
	return nil
}

// Maximum checks x <= max.
func Maximum(p string, x, max float64) error {
	if x > max {
		return fail(KindValue, p, "must be <= %s", num(max))
	}
	return nil
}

// ExclusiveMinimum checks x > min.
func ExclusiveMinimum(p string, x, min float64) error {
	if x <= min {
		return fail(KindValue, p, "must be > %s", num(min))
	}
	return nil
}

// MinItems checks a has at least n items.
func MinItems(p string, a []any, n int) error {
	if len(a) < n {
		return fail(KindValue, p, "must have at least %d items", n)
	}
	return nil
}

// MaxItems checks a has at most n items.
func MaxItems(p string, a []any, n int) error {
	if len(a) > n {
		return fail(KindValue, p, "must have at most %d items", n)
	}
	return nil
}

// Discriminator reads the string property that picks a union's variant.
func Discriminator(p string, o map[string]any, name string) (string, error) {
	v, ok := o[name]
	if !ok {
		return "", fail(KindRequired, Field(p, Escape(name)), "is required")
	}
	s, ok := v.(string)
	if !ok {
		return "", fail(KindType, Field(p, Escape(name)), "must be string")
	}
	return s, nil
}

// NoVariant is the error for a discriminator value no variant has.
func NoVariant(p, name, display string) error {
	return fail(KindValue, Field(p, Escape(name)), "must be one of %s", display)
}

func num(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
