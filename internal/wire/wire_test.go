package wire_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/wire"
)

func parsed(t *testing.T, s string) any {
	t.Helper()
	v, err := wire.Parse([]byte(s))
	require.NoError(t, err)
	return v
}

// Every constructor says what kind of violation it reports; the text stays
// "path: reason".
func TestErrorKinds(t *testing.T) {
	obj := parsed(t, `{"a":1,"b":"x","c":[1,2],"Z":true}`).(map[string]any)
	num := json.Number("1.5")
	_, _, errString := wire.String("/s", num, false)
	_, _, errNullable := wire.String("/s", num, true)
	_, errObject := wire.Object("/o", "x", false)
	_, _, errArray := wire.Array("/a", obj, false)
	_, _, errNumber := wire.Number("/n", "1", false)
	_, _, errFinite := wire.Number("/n", json.Number("1e999"), false)
	_, _, errInteger := wire.Integer("/i", num, false)
	_, errDiscMissing := wire.Discriminator("/u", obj, "kind")
	_, errDiscType := wire.Discriminator("", obj, "a")
	_, errTypeMissing := wire.MessageType(map[string]any{})
	_, errTypeType := wire.MessageType(map[string]any{"type": true})
	_, errNotObject := wire.MessageType([]any{})
	for _, tc := range []struct {
		name string
		err  error
		kind wire.Kind
		text string
	}{
		{"string", errString, wire.KindType, "/s: must be string"},
		{"nullable string", errNullable, wire.KindType, "/s: must be string or null"},
		{"object", errObject, wire.KindType, "/o: must be object"},
		{"array", errArray, wire.KindType, "/a: must be array"},
		{"number", errNumber, wire.KindType, "/n: must be number"},
		{"finite number", errFinite, wire.KindValue, "/n: must be a finite number"},
		{"integer", errInteger, wire.KindType, "/i: must be integer"},
		{"boolean", wire.Bool("/b", "true", false), wire.KindType, "/b: must be boolean"},
		{"required", wire.Required("", obj, "a", "d~/"), wire.KindRequired, "/d~0~1: is required"},
		{"closed", wire.Closed("", obj, "a", "b"), wire.KindNotAllowed, "/Z: is not allowed"},
		{"const", wire.Const("/b", "y", "x", `"x"`), wire.KindValue, `/b: must be "x"`},
		{"enum", wire.Enum("/b", "y", []any{"x", float64(1)}, `"x", 1`), wire.KindValue, `/b: must be one of "x", 1`},
		{"min length", wire.MinLength("/b", "é", 2), wire.KindValue, "/b: must be at least 2 characters"},
		{"max length", wire.MaxLength("/b", "abc", 2), wire.KindValue, "/b: must be at most 2 characters"},
		{"pattern", wire.Pattern("/b", "x", regexp.MustCompile(`^[0-9]+$`)), wire.KindValue, "/b: must match pattern ^[0-9]+$"},
		{"uuid", wire.Format("/b", "550e8400e29b41d4a716446655440000", "uuid"), wire.KindValue, "/b: must be a valid uuid"},
		{"date-time", wire.Format("/b", "yesterday", "date-time"), wire.KindValue, "/b: must be a valid date-time"},
		{"uri", wire.Format("/b", "no scheme", "uri"), wire.KindValue, "/b: must be a valid uri"},
		{"minimum", wire.Minimum("/n", 1, 2), wire.KindValue, "/n: must be >= 2"},
		{"maximum", wire.Maximum("/n", 3, 2), wire.KindValue, "/n: must be <= 2"},
		{"exclusive minimum", wire.ExclusiveMinimum("/n", 2, 2), wire.KindValue, "/n: must be > 2"},
		{"min items", wire.MinItems("/c", []any{1}, 2), wire.KindValue, "/c: must have at least 2 items"},
		{"max items", wire.MaxItems("/c", []any{1, 2}, 1), wire.KindValue, "/c: must have at most 1 items"},
		{"discriminator missing", errDiscMissing, wire.KindRequired, "/u/kind: is required"},
		{"discriminator not a string", errDiscType, wire.KindType, "/a: must be string"},
		{"no variant", wire.NoVariant("/u", "kind", `"a", "b"`), wire.KindValue, `/u/kind: must be one of "a", "b"`},
		{"type missing", errTypeMissing, wire.KindRequired, "/type: is required"},
		{"type not a string", errTypeType, wire.KindType, "/type: must be string"},
		{"frame not an object", errNotObject, wire.KindType, "must be object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			we, ok := wire.AsError(tc.err)
			require.True(t, ok, "%v (%T), want a *wire.Error", tc.err, tc.err)
			assert.Equal(t, tc.kind, we.Kind, "kind of %q", tc.text)
			assert.Equal(t, tc.text, we.Error())
			assert.Empty(t, we.Message, "constructors do not know the message type")
		})
	}
}

func TestParseErrorsAreSyntax(t *testing.T) {
	for _, in := range []string{"", "   ", "{", `{"a":1} {}`, "nope", `{"a":` + strings.Repeat(" ", wire.MaxFrameBytes) + `1}`} {
		_, err := wire.Parse([]byte(in))
		we, ok := wire.AsError(err)
		require.True(t, ok, "Parse(%.40q) = %v", in, err)
		assert.Equal(t, wire.KindSyntax, we.Kind, "Parse(%.40q) = %v", in, err)
		assert.Empty(t, we.Path)
	}
}

func TestUnknownTypeCarriesTheType(t *testing.T) {
	we, ok := wire.AsError(wire.UnknownType("shout"))
	require.True(t, ok)
	assert.Equal(t, wire.Error{Kind: wire.KindUnknownType, Message: "shout", Path: "/type", Reason: `unknown message type "shout"`}, *we)
	assert.Equal(t, `/type: unknown message type "shout"`, we.Error())
}

func TestWithMessage(t *testing.T) {
	err := wire.WithMessage(wire.Required("", map[string]any{}, "message"), "chat")
	we, _ := wire.AsError(err)
	assert.Equal(t, wire.Error{Kind: wire.KindRequired, Message: "chat", Path: "/message", Reason: "is required"}, *we)

	// A message type already set (an unknown one) is kept, wrapped errors
	// are found, and other errors and nil pass through.
	we, _ = wire.AsError(wire.WithMessage(fmt.Errorf("ctx: %w", wire.UnknownType("x")), "chat"))
	assert.Equal(t, "x", we.Message)
	other := errors.New("other")
	assert.Same(t, other, wire.WithMessage(other, "chat"))
	assert.NoError(t, wire.WithMessage(nil, "chat"))
}

func TestKindString(t *testing.T) {
	for k, want := range map[wire.Kind]string{
		wire.KindInternal: "internal", wire.KindSyntax: "syntax", wire.KindUnknownType: "unknown_type",
		wire.KindRequired: "required", wire.KindType: "type", wire.KindValue: "value",
		wire.KindNotAllowed: "not_allowed", wire.Kind(200): "Kind(200)",
	} {
		assert.Equal(t, want, k.String())
	}
	assert.Equal(t, wire.Kind(1), wire.KindSyntax, "KindSyntax is the first kind of violation")
}

func TestUnimplementedError(t *testing.T) {
	var err error = &wire.UnimplementedError{Message: "chat"}
	assert.ErrorIs(t, err, wire.ErrUnimplemented)
	assert.ErrorIs(t, fmt.Errorf("dispatch: %w", err), wire.ErrUnimplemented)
	assert.Equal(t, `message type "chat" is not implemented`, err.Error())
	var ue *wire.UnimplementedError
	require.ErrorAs(t, err, &ue)
	assert.Equal(t, "chat", ue.Message)
	assert.NotErrorIs(t, errors.New("x"), wire.ErrUnimplemented)
}
