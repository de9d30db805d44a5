//go:build tools

// This file pins the versions of the code generators and of staticcheck in
// go.mod; `go run` of these packages (generated/generate.go, .ci/run) uses
// exactly these versions. ogen (v1.24.0) is pinned by cmd/asyncapigen,
// which runs it as a library.
package tools

import (
	_ "github.com/atombender/go-jsonschema/pkg/generator"
	_ "honnef.co/go/tools/cmd/staticcheck"
)
