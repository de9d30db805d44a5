package agent

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
)

var decodeCases = []struct {
	name, text string
	want       map[string]any // nil: an error
	err        string
}{
	{"bare", `{"a": 1}`, map[string]any{"a": 1.0}, ""},
	{"prose around", "Sure! Here it is: {\"a\": \"x}\"} Hope that helps {:", map[string]any{"a": "x}"}, ""},
	{"fenced", "Here:\n```json\n{\"a\": [1, 2]}\n```\nDone.", map[string]any{"a": []any{1.0, 2.0}}, ""},
	{"fenced without language", "```\n{\"a\": true}\n```", map[string]any{"a": true}, ""},
	{"fence after an example in prose", "Like {this}.\n```json\n{\"a\": 2}\n```", map[string]any{"a": 2.0}, ""},
	{"trailing commas", `{"a": [1, 2,], "b": "c",}`, map[string]any{"a": []any{1.0, 2.0}, "b": "c"}, ""},
	{"single quotes", `{'a': 'it\'s "x"', 'b': ['c']}`, map[string]any{"a": `it's "x"`, "b": []any{"c"}}, ""},
	{"unquoted keys and Python literals", `{expand: True, nodes: None, done: False}`, map[string]any{"expand": true, "nodes": nil, "done": false}, ""},
	{"raw line break in a string", "{\"a\": \"one\ntwo\"}", map[string]any{"a": "one\ntwo"}, ""},
	{"nested", `{"nodes": [{"id": "a", "deps": []}]}`, map[string]any{"nodes": []any{map[string]any{"id": "a", "deps": []any{}}}}, ""},
	{"prose only", "I would rather not answer in JSON.", nil, "the answer holds no JSON object"},
	{"empty", "", nil, "the answer holds no JSON object"},
	{"cut short", `{"candidates": ["a", "b"`, nil, "the answer's JSON object is not complete"},
	{"not JSON", `{this is not JSON}`, nil, "the answer holds no valid JSON object: invalid character 't' looking for beginning of object key string"},
}

func TestDecodeJSON(t *testing.T) {
	for _, tc := range decodeCases {
		t.Run(tc.name, func(t *testing.T) {
			var got map[string]any
			err := decodeJSON(tc.text, &got)
			if tc.want == nil {
				assert.EqualError(t, err, tc.err, "decodeJSON(%q)", tc.text)
				assert.ErrorAs(t, err, new(*badOutput))
				return
			}
			if assert.NoError(t, err, "decodeJSON(%q)", tc.text) {
				assert.Equal(t, tc.want, got, "decodeJSON(%q)", tc.text)
			}
		})
	}
	var v struct {
		Scores []float64 `json:"scores"`
	}
	err := decodeJSON(`{"scores": ["high", "low"]}`, &v)
	assert.ErrorContains(t, err, "the answer is not the JSON object asked for: json: cannot unmarshal string", "the wrong types")
}

// FuzzDecodeJSON: any answer decodes into an object or fails with a
// badOutput, and what decodes is JSON.
func FuzzDecodeJSON(f *testing.F) {
	for _, tc := range decodeCases {
		f.Add(tc.text)
	}
	f.Fuzz(func(t *testing.T, text string) {
		var v map[string]any
		if err := decodeJSON(text, &v); err != nil {
			if _, ok := err.(*badOutput); !ok {
				t.Fatalf("decodeJSON(%q) = %v, want a *badOutput", text, err)
			}
			return
		}
		if _, err := json.Marshal(v); err != nil {
			t.Fatalf("decodeJSON(%q) gave %v, which does not encode: %v", text, v, err)
		}
		obj, err := findObject(text)
		if err != nil || !json.Valid(obj) {
			t.Fatalf("findObject(%q) = %q, %v: not JSON", text, obj, err)
		}
	})
}
