package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// example is one example of a document, as TypeScript: the type it is
// checked against (src/examples.check.ts) and its JSON.
type example struct{ typ, json string }

// protocolExamples reads the examples of the protocol's own document
// kept in internal/protocol/NAME/testdata/wire/examples.json, each typed as
// the union of its direction (a client's frames or the server's).
func protocolExamples(root, name string) ([]example, error) {
	b, err := os.ReadFile(filepath.Join(root, "internal", "protocol", name, "testdata", "wire", "examples.json"))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var exs []struct {
		Direction string          `json:"direction"`
		Frame     json.RawMessage `json:"frame"`
		Wrap      json.RawMessage `json:"wrap"`
		Merge     json.RawMessage `json:"merge"`
	}
	if err := json.Unmarshal(b, &exs); err != nil {
		return nil, fmt.Errorf("%s examples: %w", name, err)
	}
	var out []example
	for _, ex := range exs {
		frame := ex.Frame
		if len(ex.Merge) > 0 {
			var base, over map[string]any
			if json.Unmarshal(ex.Merge, &base) == nil && json.Unmarshal(frame, &over) == nil {
				for k, v := range over {
					base[k] = v
				}
				frame, _ = json.Marshal(base)
			}
		}
		if len(ex.Wrap) > 0 {
			frame = bytes.Replace(ex.Wrap, []byte(`"$FRAGMENT"`), frame, 1)
		}
		var v any
		if err := json.Unmarshal(frame, &v); err != nil {
			return nil, fmt.Errorf("%s examples: %w", name, err)
		}
		pretty, _ := json.MarshalIndent(v, "", "  ")
		typ := "ServerMessage"
		if ex.Direction == "inbound" {
			typ = "ClientMessage"
		}
		out = append(out, example{typ, string(pretty)})
	}
	return out, nil
}
