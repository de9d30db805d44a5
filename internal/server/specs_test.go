package server

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// The documents are served exactly as they are in the repository, with
// no credentials even under --auth keys, behind the Host check; the
// reference pages name every message of their document.
func TestSpecsServed(t *testing.T) {
	cfg, _, _ := keysConfig(t)
	ts := startServer(t, cfg, Options{})
	base := "http://" + ts.Addr("main")
	get := func(t *testing.T, path string) (int, string, string) {
		t.Helper()
		resp, err := http.Get(base + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
	}
	repo := func(t *testing.T, rel string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join("..", "..", rel))
		require.NoError(t, err)
		return string(b)
	}

	served := map[string]string{"/openapi.yaml": "schemas/openapi/threads.yaml"}
	docs, err := filepath.Glob("../../asyncapi/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, docs)
	for _, d := range docs {
		served["/asyncapi/"+filepath.Base(d)] = "asyncapi/" + filepath.Base(d)
	}
	schemas, err := filepath.Glob("../../schemas/*/*.json")
	require.NoError(t, err)
	require.Greater(t, len(schemas), 50)
	for _, s := range schemas {
		rel, _ := filepath.Rel("../..", s)
		served["/"+filepath.ToSlash(rel)] = filepath.ToSlash(rel)
	}
	for path, rel := range served {
		status, ctype, body := get(t, path)
		require.Equal(t, http.StatusOK, status, path)
		assert.Equal(t, repo(t, rel), body, "%s is %s as in the repository", path, rel)
		if strings.HasSuffix(path, ".yaml") {
			assert.Equal(t, "application/yaml; charset=utf-8", ctype, path)
		} else {
			assert.Equal(t, "application/json", ctype, path)
		}
	}

	// The JSON form is the YAML document's content.
	status, _, body := get(t, "/openapi.json")
	require.Equal(t, http.StatusOK, status)
	var fromJSON, fromYAML any
	require.NoError(t, json.Unmarshal([]byte(body), &fromJSON))
	require.NoError(t, yaml.Unmarshal([]byte(repo(t, "schemas/openapi/threads.yaml")), &fromYAML))
	want, _ := json.Marshal(fromYAML)
	got, _ := json.Marshal(fromJSON)
	assert.JSONEq(t, string(want), string(got))

	// A reference page per protocol, listing every message by name.
	status, ctype, index := get(t, "/reference/")
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, "text/html; charset=utf-8", ctype)
	for _, d := range docs {
		name := strings.TrimSuffix(filepath.Base(d), ".yaml")
		assert.Contains(t, index, `href="/reference/`+name+`.html"`)
		status, _, page := get(t, "/reference/"+name+".html")
		require.Equal(t, http.StatusOK, status, name)
		var doc struct {
			Components struct {
				Messages map[string]struct {
					Name string `yaml:"name"`
				} `yaml:"messages"`
			} `yaml:"components"`
		}
		require.NoError(t, yaml.Unmarshal([]byte(repo(t, "asyncapi/"+name+".yaml")), &doc))
		require.NotEmpty(t, doc.Components.Messages)
		for _, m := range doc.Components.Messages {
			assert.Contains(t, page, `<h3 id="`+m.Name+`">`, "%s's page shows %s", name, m.Name)
		}
		assert.NotContains(t, page, "<script", "no script on the page")
	}
	status, _, threads := get(t, "/reference/threads.html")
	require.Equal(t, http.StatusOK, status)
	assert.Contains(t, threads, "<code>GET /api/v1/threads/{threadId}/events</code>")

	// Nothing else of the embedded tree, and no way out of it.
	for _, path := range []string{"/schemas/openapi/ogen.yml", "/asyncapi/../go.mod", "/schemas/%2e%2e/go.mod"} {
		status, _, _ := get(t, path)
		assert.NotEqual(t, http.StatusOK, status, path)
	}

	// The Host check holds for the documents too.
	req, _ := http.NewRequest(http.MethodGet, base+"/openapi.yaml", nil)
	req.Host = "evil.example"
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusMisdirectedRequest, resp.StatusCode)
}
