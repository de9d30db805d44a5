// Package generated holds the code generated from the schema documents in
// ../schemas and ../asyncapi. Every file below it except this one is generator
// output: edit the documents or the generators, then run `go generate ./...`
// (or `make generate`). CI regenerates and fails on any difference.
package generated

// REST + SSE threads API, one package from the OpenAPI 3.1 document: ogen's
// types, JSON and client (asyncapigen runs the ogen library pinned in
// go.mod with ogen.yml), and validators of its component schemas with
// structured errors (ogen's are text), which the threads adapter checks
// before decoding with ogen's types.
//go:generate go run ../cmd/asyncapigen -openapi ../schemas/openapi/threads.yaml -ogen ../schemas/openapi/ogen.yml -out threadsapi

// ChatUI's REST calls beside the AG2 WebSocket, the same way: types, JSON,
// client and structured validators; the server is hand-written in
// internal/protocol/ag2 (rest.go).
//go:generate go run ../cmd/asyncapigen -openapi ../schemas/openapi/ag2.yaml -ogen ../schemas/openapi/ogen.yml -out ag2restapi

// WebSocket protocols: typed messages, validating decoders, encoders, handler
// interfaces and constructors from the AsyncAPI 3.0 documents.
//go:generate go run ../cmd/asyncapigen -in ../asyncapi/agentchat.yaml -out agentchatapi
//go:generate go run ../cmd/asyncapigen -in ../asyncapi/ag2.yaml -out ag2api
//go:generate go run ../cmd/asyncapigen -in ../asyncapi/loom.yaml -out loomapi
//go:generate go run ../cmd/asyncapigen -in ../asyncapi/agentloop.yaml -out agentloopapi

// The documents as the server serves them (embedded: /openapi.yaml,
// /asyncapi/, /schemas/) and a reference page per protocol (/reference/).
//go:generate go run ../cmd/specdocs -root .. -out specs

// TypeScript types of every message, from the same documents and schemas,
// as an npm-ready package (ts/; CI type-checks it and every example of the
// documents with tsc --strict).
//go:generate go run ../cmd/tsgen -root .. -out ts
