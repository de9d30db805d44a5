package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The playground is served at / of the main listener without credentials
// (it holds no data; the protocols it talks to still ask for them), with
// its scripts, its configuration and the schema bundle; a WebSocket
// upgrade at / is still Loom's and still needs a credential; a request for
// another Host is refused; a --listen of one protocol serves no playground.
func TestPlaygroundServed(t *testing.T) {
	cfg, alice, _ := keysConfig(t, "--listen", "agentchat=127.0.0.1:0")
	ts := startServer(t, cfg, Options{})
	addr := ts.Addr("main")
	_, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)

	get := func(path string) (*http.Response, []byte) {
		t.Helper()
		resp, err := http.Get("http://" + addr + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		var b []byte
		b, err = io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, b
	}
	resp, body := get("/")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"))
	assert.Contains(t, resp.Header.Get("Content-Security-Policy"), "default-src 'none'")
	assert.Contains(t, string(body), `<script type="module" src="/playground/app.js">`)

	// Every script of the page (app.js imports the others) and its style
	// sheet are served as they are in the repository.
	scripts, err := filepath.Glob(filepath.Join("..", "playground", "static", "*.js"))
	require.NoError(t, err)
	require.Contains(t, scripts, filepath.Join("..", "playground", "static", "validate.js"))
	served := map[string]string{"/playground/style.css": "text/css; charset=utf-8"}
	for _, s := range scripts {
		served["/playground/"+filepath.Base(s)] = "text/javascript; charset=utf-8"
	}
	for path, ctype := range served {
		resp, body := get(path)
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		assert.Equal(t, ctype, resp.Header.Get("Content-Type"), path)
		want, err := os.ReadFile(filepath.Join("..", "playground", "static", filepath.Base(path)))
		require.NoError(t, err)
		assert.True(t, bytes.Equal(want, body), "%s is internal/playground/static/%s (%d bytes served, %d in the file)",
			path, filepath.Base(path), len(body), len(want))
	}
	resp, _ = get("/playground/tsconfig.json")
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "only the page's own files are served")

	resp, body = get("/playground/config.json")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var conf struct {
		Auth      string   `json:"auth"`
		Protocols []string `json:"protocols"`
	}
	require.NoError(t, json.Unmarshal(body, &conf))
	assert.Equal(t, "keys", conf.Auth, "the page shows its token field")
	assert.Equal(t, []string{"agentchat", "threads", "agentloop", "ag2", "loom"}, conf.Protocols)

	resp, body = get("/playground/schemas.json")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var bundle map[string]map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(body, &bundle))
	for _, proto := range []string{"agentchat", "ag2", "agentloop", "loom"} {
		files, err := filepath.Glob(filepath.Join("..", "..", "schemas", proto, "*.json"))
		require.NoError(t, err)
		require.Len(t, bundle[proto], len(files), proto)
		for _, f := range files {
			want, err := os.ReadFile(f)
			require.NoError(t, err)
			assert.JSONEq(t, string(want), string(bundle[proto][filepath.Base(f)]), f)
		}
	}
	want, err := os.ReadFile(filepath.Join("..", "..", "generated", "specs", "files", "openapi.json"))
	require.NoError(t, err)
	assert.JSONEq(t, string(want), string(bundle["threads"]["openapi.json"]))

	// Loom still takes upgrades at /, with a credential only.
	code, _ := upgrade(t, "ws://"+addr+"/", nil, "")
	assert.Equal(t, http.StatusUnauthorized, code, "an upgrade at / is Loom's, behind the credential check")
	code, ws := upgrade(t, "ws://"+addr+"/", bearer(alice), "")
	require.Equal(t, http.StatusSwitchingProtocols, code)
	_ = ws.CloseNow()

	// The Host check comes first, as everywhere.
	for _, host := range []string{"attacker.example:" + port, "localhost.attacker.example"} {
		code, _ := request(t, http.MethodGet, "http://"+addr+"/", host, nil, nil)
		assert.Equal(t, http.StatusMisdirectedRequest, code, "Host %s", host)
		code, _ = request(t, http.MethodGet, "http://"+addr+"/playground/schemas.json", host, nil, nil)
		assert.Equal(t, http.StatusMisdirectedRequest, code, "Host %s", host)
	}
	code, _ = request(t, http.MethodGet, "http://"+addr+"/", "localhost:"+port, nil, nil)
	assert.Equal(t, http.StatusOK, code)

	// A protocol's own listener has no playground.
	code, _ = request(t, http.MethodGet, "http://"+ts.Addr("agentchat")+"/playground/app.js", "", nil, bearer(alice))
	assert.Equal(t, http.StatusNotFound, code)
	assert.Contains(t, ts.Banner(), "playground http://"+addr+"/")
}
