package server

import (
	"io/fs"
	"net/http"
	"path"

	"github.com/agentwire/agentwire/generated/specs"
)

// specsHandler serves the schema documents agentwire is generated from,
// exactly as they are in the repository (embedded at build time), and the
// reference pages rendered from them:
//
//	/openapi.yaml, /openapi.json   the threads API's OpenAPI document
//	/asyncapi/{protocol}.yaml      the WebSocket protocols' AsyncAPI documents
//	/schemas/{protocol}/{name}     their JSON Schemas (and OpenAPI documents)
//	/reference/                    a page per protocol, and an index
//
// They describe the API, not anyone's data, so they are served without
// credentials, behind the same Host and Origin checks as everything else.
func specsHandler() http.Handler {
	files, err := fs.Sub(specs.Files, "files")
	if err != nil {
		panic(err) // the embedded tree always has it
	}
	serve := http.FileServerFS(files)
	mux := http.NewServeMux()
	alias := func(to string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			typed(w, to)
			http.ServeFileFS(w, r, files, to)
		}
	}
	mux.HandleFunc("GET /openapi.yaml", alias("schemas/openapi/threads.yaml"))
	mux.HandleFunc("GET /openapi.json", alias("openapi.json"))
	for _, prefix := range []string{"/asyncapi/", "/schemas/", "/reference/"} {
		mux.HandleFunc("GET "+prefix, func(w http.ResponseWriter, r *http.Request) {
			typed(w, r.URL.Path)
			w.Header().Set("X-Content-Type-Options", "nosniff")
			serve.ServeHTTP(w, r)
		})
	}
	return mux
}

// typed sets the Content-Type of the file at name, which Go's table may
// not know (YAML).
func typed(w http.ResponseWriter, name string) {
	switch path.Ext(name) {
	case ".yaml":
		w.Header().Set("Content-Type", "application/yaml; charset=utf-8")
	case ".json":
		w.Header().Set("Content-Type", "application/json")
	case ".html":
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
	}
}
