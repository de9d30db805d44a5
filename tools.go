//go:build tools

// This file pins the code generators' versions in go.mod; `go run` of these
// packages in generated/generate.go uses exactly these versions.
package tools

import (
	_ "github.com/atombender/go-jsonschema/pkg/generator"
	_ "github.com/ogen-go/ogen/cmd/ogen"
)
