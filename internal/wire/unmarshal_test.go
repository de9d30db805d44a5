package wire_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/wire"
)

type inner struct {
	Name string `json:"name"`
}

type outer struct {
	Type   string           `json:"type"`
	Limit  *int             `json:"limit,omitempty"`
	Items  []inner          `json:"items,omitempty"`
	ByKey  map[string]inner `json:"by_key,omitempty"`
	Free   json.RawMessage  `json:"free,omitempty"`
	Nested *inner           `json:"nested,omitempty"`
}

// Members are matched to fields by exact name, at every depth; members in
// another case are extra members, not the field.
func TestUnmarshalMatchesNamesExactly(t *testing.T) {
	cases := []struct {
		name, frame string
		want        outer
	}{
		{"case variant only", `{"type":"a","lImit":0}`, outer{Type: "a"}},
		{"case variant after the field", `{"type":"a","limit":5,"LIMIT":0}`, outer{Type: "a", Limit: ptr(5)}},
		{"case variant of type", `{"type":"a","TYPE":"b"}`, outer{Type: "a"}},
		{"in array items", `{"type":"a","items":[{"name":"x","NAME":"y"}]}`, outer{Type: "a", Items: []inner{{Name: "x"}}}},
		{"in map values", `{"type":"a","by_key":{"k":{"Name":"y"}}}`, outer{Type: "a", ByKey: map[string]inner{"k": {}}}},
		{"in a nested object", `{"type":"a","nested":{"nAme":"y","name":"x"}}`, outer{Type: "a", Nested: &inner{Name: "x"}}},
		{"raw members kept as sent", `{"type":"a","free":{"Any":1,"any":2}}`, outer{Type: "a", Free: json.RawMessage(`{"Any":1,"any":2}`)}},
		{"unknown members ignored", `{"type":"a","extra":{"limit":3}}`, outer{Type: "a"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got outer
			require.NoError(t, wire.Unmarshal([]byte(c.frame), &got))
			assert.Equal(t, c.want, got)
		})
	}
}

func TestUnmarshalErrors(t *testing.T) {
	var o outer
	err := wire.Unmarshal([]byte(`{"type":1}`), &o)
	we, ok := wire.AsError(err)
	require.True(t, ok, "%v", err)
	assert.Contains(t, we.Reason, "cannot decode")
	assert.Equal(t, wire.KindInternal, we.Kind)

	we, ok = wire.AsError(wire.Unmarshal([]byte(`{"type":`), &o))
	require.True(t, ok)
	assert.Equal(t, wire.KindSyntax, we.Kind)
	assert.Error(t, wire.Unmarshal([]byte(`{}`), o), "not a pointer")
}

func ptr[T any](v T) *T { return &v }
