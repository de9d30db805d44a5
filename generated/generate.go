// Package generated holds the code generated from the schema documents in
// ../schemas and ../asyncapi. Every file below it except this one is generator
// output: edit the documents or the generators, then run `go generate ./...`
// (or `make generate`). CI regenerates and fails on any difference.
package generated

// REST + SSE threads API: ogen server and client from the OpenAPI 3.1 document.
//go:generate go run github.com/ogen-go/ogen/cmd/ogen --config ../schemas/openapi/ogen.yml --target threadsapi --package threadsapi --clean ../schemas/openapi/threads.yaml

// Validators for the same document's component schemas, with structured
// errors (ogen's are text); the threads adapter validates with them before
// decoding with ogen's types.
//go:generate go run ../cmd/asyncapigen -openapi ../schemas/openapi/threads.yaml -out threadsschema

// WebSocket protocols: typed messages, validating decoders, encoders, handler
// interfaces and constructors from the AsyncAPI 3.0 documents.
//go:generate go run ../cmd/asyncapigen -in ../asyncapi/agentchat.yaml -out agentchatapi
//go:generate go run ../cmd/asyncapigen -in ../asyncapi/ag2.yaml -out ag2api
//go:generate go run ../cmd/asyncapigen -in ../asyncapi/loom.yaml -out loomapi
//go:generate go run ../cmd/asyncapigen -in ../asyncapi/agentloop.yaml -out agentloopapi
