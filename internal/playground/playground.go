// Package playground serves the browser playground: a page at / of the
// main listener (a GET that is not a WebSocket upgrade) that talks to the
// server over any of its five protocols, shows each frame beside the
// rendered conversation and checks every frame against its schema in the
// page.
//
// The page is plain JavaScript (ES modules) with JSDoc types taken from the
// generated TypeScript package (generated/ts), type-checked by tsc in CI
// (static/tsconfig.json), so no build step and no Node are needed to build
// the binary. Everything it loads comes from this server:
//
//	/                          the page (static/index.html)
//	/playground/{file}         its scripts and style sheet
//	/playground/config.json    what the page needs to know of the server
//	/playground/schemas.json   every protocol's schema documents, one object
//
// The schema bundle is built from the same embedded documents /schemas/
// and /openapi.json serve (generated/specs). Like those, nothing here is
// anyone's data, so it is served without credentials, behind the server's
// Host and Origin checks; every protocol request the page makes carries
// the token typed into its token field.
package playground

import (
	"embed"
	"encoding/json"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"sync"

	"github.com/agentwire/agentwire/generated/specs"
)

//go:embed static/index.html static/*.js static/style.css
var files embed.FS

// Config is what the page is told about the server.
type Config struct {
	// Auth is the server's --auth mode: "none", "keys" or "jwt". The page
	// shows its token field unless it is "none".
	Auth string `json:"auth"`
	// Protocols are the protocols the main listener serves, in the
	// registry's order.
	Protocols []string `json:"protocols"`
}

// csp allows the page nothing from elsewhere: its scripts, style and
// connections (same-origin WebSockets included) are this server's.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Handler serves the page, its files, its configuration and the schema
// bundle at the paths of the package comment.
func Handler(cfg Config) http.Handler {
	static, err := fs.Sub(files, "static")
	if err != nil {
		panic(err) // the embedded tree always has it
	}
	conf, err := json.Marshal(cfg)
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		headers(w, "text/html; charset=utf-8")
		http.ServeFileFS(w, r, static, "index.html")
	})
	mux.HandleFunc("GET /playground/config.json", func(w http.ResponseWriter, r *http.Request) {
		headers(w, "application/json")
		w.Write(conf)
	})
	mux.HandleFunc("GET /playground/schemas.json", func(w http.ResponseWriter, r *http.Request) {
		b, err := bundle()
		if err != nil {
			http.Error(w, "the schema documents do not load: "+err.Error(), http.StatusInternalServerError)
			return
		}
		headers(w, "application/json")
		w.Write(b)
	})
	mux.HandleFunc("GET /playground/{file}", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("file")
		switch path.Ext(name) {
		case ".js":
			headers(w, "text/javascript; charset=utf-8")
		case ".css":
			headers(w, "text/css; charset=utf-8")
		default:
			http.NotFound(w, r)
			return
		}
		http.ServeFileFS(w, r, static, name)
	})
	return mux
}

func headers(w http.ResponseWriter, ctype string) {
	h := w.Header()
	h.Set("Content-Type", ctype)
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	// A new binary serves a new page: the browser asks again each time.
	h.Set("Cache-Control", "no-cache")
}

// bundle is every protocol's JSON Schemas by file name, and the threads
// API's OpenAPI document (as JSON) under "threads":
//
//	{"agentchat": {"agent_message.json": {…}, …}, …, "threads": {"openapi.json": {…}}}
var bundle = sync.OnceValues(func() ([]byte, error) {
	out := map[string]map[string]json.RawMessage{}
	root := "files/schemas"
	dirs, err := fs.ReadDir(specs.Files, root)
	if err != nil {
		return nil, err
	}
	for _, d := range dirs {
		if !d.IsDir() || d.Name() == "openapi" || d.Name() == "workflow" {
			continue
		}
		docs := map[string]json.RawMessage{}
		entries, err := fs.ReadDir(specs.Files, root+"/"+d.Name())
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if !strings.HasSuffix(e.Name(), ".json") {
				continue
			}
			b, err := fs.ReadFile(specs.Files, root+"/"+d.Name()+"/"+e.Name())
			if err != nil {
				return nil, err
			}
			docs[e.Name()] = b
		}
		out[d.Name()] = docs
	}
	b, err := fs.ReadFile(specs.Files, "files/openapi.json")
	if err != nil {
		return nil, err
	}
	out["threads"] = map[string]json.RawMessage{"openapi.json": b}
	return json.Marshal(out)
})
