//go:build tools

// This file pins the versions of the code generators and of staticcheck in
// go.mod; `go run` of these packages (generated/generate.go, .ci/run) uses
// exactly these versions.
package tools

import (
	_ "github.com/atombender/go-jsonschema/pkg/generator"
	_ "github.com/ogen-go/ogen/cmd/ogen"
	_ "honnef.co/go/tools/cmd/staticcheck"
)
