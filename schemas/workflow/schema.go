// Package workflow holds the JSON Schema of agentwire's workflow files, for
// the loader in internal/workflow to validate them against.
package workflow

import _ "embed"

// Schema is workflow.schema.json.
//
//go:embed workflow.schema.json
var Schema []byte
