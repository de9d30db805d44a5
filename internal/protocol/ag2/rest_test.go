package ag2_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/generated/ag2api"
	"github.com/agentwire/agentwire/generated/ag2restapi"
	"github.com/agentwire/agentwire/internal/config"
)

// call makes a request to the server's main listener and returns the
// status and body. A JSON body is sent as application/json.
func (h *harness) call(method, path, body string, hdr ...string) (int, []byte) {
	h.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://"+h.srv.Addr("main")+path, r)
	require.NoError(h.t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(h.t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(h.t, err)
	return res.StatusCode, b
}

// ok makes a request that must answer 200 with a body its schema allows,
// and decodes it into out.
func (h *harness) ok(method, path, body string, validate func([]byte) error, out any) {
	h.t.Helper()
	status, b := h.call(method, path, body)
	require.Equal(h.t, http.StatusOK, status, "%s %s: %s", method, path, b)
	require.NoError(h.t, validate(b), "the answer is not what the document allows: %s", b)
	require.NoError(h.t, json.Unmarshal(b, out))
}

// fails makes a request that must answer status with the document's
// error body, and returns its detail.
func (h *harness) fails(status int, method, path, body string, hdr ...string) string {
	h.t.Helper()
	got, b := h.call(method, path, body, hdr...)
	require.Equal(h.t, status, got, "%s %s: %s", method, path, b)
	require.NoError(h.t, ag2restapi.ValidateErrorJSON(b), "an error body the document does not allow: %s", b)
	var e struct{ Detail string }
	require.NoError(h.t, json.Unmarshal(b, &e))
	require.NotEmpty(h.t, e.Detail)
	return e.Detail
}

type startAnswer struct {
	ChatID   string `json:"chat_id"`
	Reused   bool   `json:"reused"`
	Workflow string `json:"workflow_name"`
}

// startChat starts a chat of workflow for e1/u1 over REST, as ChatUI does.
func (h *harness) startChat(workflow, requestID string) startAnswer {
	h.t.Helper()
	body := `{"user_id":"u1"}`
	if requestID != "" {
		body = `{"user_id":"u1","client_request_id":"` + requestID + `"}`
	}
	var a startAnswer
	h.ok(http.MethodPost, "/api/chats/e1/"+workflow+"/start", body, ag2restapi.ValidateStartChatResponseJSON, &a)
	return a
}

type inputAnswer struct {
	Kind      string `json:"kind"`
	MessageID string `json:"message_id"`
	RequestID string `json:"request_id"`
}

// input posts ChatUI's /input for e1/u1.
func (h *harness) input(chat, body string) inputAnswer {
	h.t.Helper()
	var a inputAnswer
	h.ok(http.MethodPost, "/chat/e1/"+url.PathEscape(chat)+"/u1/input", body, ag2restapi.ValidateInputResponseJSON, &a)
	return a
}

func TestRESTWorkflowsAndTransport(t *testing.T) {
	h := start(t, testConfig(t, "--workflows", "testdata/workflows"))
	var wfs map[string]struct {
		HumanInTheLoop bool   `json:"human_in_the_loop"`
		StartupMode    string `json:"startup_mode"`
		Transport      string `json:"transport"`
		Agents         []struct{ Name string }
	}
	h.ok(http.MethodGet, "/api/workflows", "", ag2restapi.ValidateWorkflowsJSON, &wfs)
	require.Contains(t, wfs, "studio")
	st := wfs["studio"]
	assert.True(t, st.HumanInTheLoop)
	assert.Equal(t, "UserDriven", st.StartupMode)
	assert.Equal(t, "websocket", st.Transport)
	require.Len(t, st.Agents, 2)
	assert.Equal(t, "designer", st.Agents[0].Name)

	var tr struct {
		Transport   string `json:"transport"`
		AllowResume bool   `json:"allow_resume"`
		WsPath      string `json:"ws_path"`
	}
	h.ok(http.MethodGet, "/api/workflows/studio/transport", "", ag2restapi.ValidateTransportJSON, &tr)
	assert.Equal(t, "websocket", tr.Transport)
	assert.True(t, tr.AllowResume)
	assert.Equal(t, ag2api.Address, tr.WsPath)
	assert.Contains(t, h.fails(http.StatusNotFound, http.MethodGet, "/api/workflows/nope/transport", ""), "studio",
		"an unknown workflow's answer names those on offer")

	// Without a workflow folder the built-in ones are on offer.
	h2 := start(t, testConfig(t))
	var builtin map[string]any
	h2.ok(http.MethodGet, "/api/workflows", "", ag2restapi.ValidateWorkflowsJSON, &builtin)
	assert.Contains(t, keys(builtin), "default")
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestRESTChatUITurn is ChatUI's flow: start over REST, open the socket,
// post the turn over REST, stream it over the socket.
func TestRESTChatUITurn(t *testing.T) {
	h := start(t, testConfig(t))
	s := h.startChat("default", "")
	_, err := uuid.Parse(s.ChatID)
	require.NoError(t, err, "the chat id is a UUID")
	assert.False(t, s.Reused)
	assert.Equal(t, "default", s.Workflow)

	var ex struct{ Exists bool }
	h.ok(http.MethodGet, "/api/chats/exists/e1/default/"+s.ChatID, "", ag2restapi.ValidateChatExistsJSON, &ex)
	assert.False(t, ex.Exists, "a chat exists once it has a turn")

	c := h.dialAs(s.ChatID, "e1", "u1")
	a := h.input(s.ChatID, `{"message":"echo hello there","workflow_name":"default","enterprise_id":"e1","user_id":"u1"}`)
	assert.Equal(t, "turn", a.Kind)
	assert.NotEmpty(t, a.MessageID)
	frames := c.turn()
	checkSeqs(t, frames)
	texts := ofType(frames, ag2api.TypeChatText)
	require.Len(t, texts, 1, "the turn posted over REST is not echoed to the chat's socket: %v", types(frames))
	assert.Equal(t, "You said: echo hello there", texts[0].str("content"))
	usage := ofType(frames, ag2api.TypeChatUsageSummary)
	require.Len(t, usage, 1)
	var top struct {
		Seq         int `json:"seq"`
		TotalTokens int `json:"total_tokens"`
	}
	require.NoError(t, json.Unmarshal(usage[0].raw, &top))
	assert.Equal(t, 1500, top.TotalTokens, "ChatUI reads the token counts at the top level")
	assert.Equal(t, usage[0].seq, top.Seq, "and the seq")

	h.ok(http.MethodGet, "/api/chats/exists/e1/default/"+s.ChatID, "", ag2restapi.ValidateChatExistsJSON, &ex)
	assert.True(t, ex.Exists)

	// A retried start gives the same chat.
	rid := uuid.NewString()
	first := h.startChat("default", rid)
	h.input(first.ChatID, `{"message":"echo once"}`)
	again := h.startChat("default", rid)
	assert.Equal(t, first.ChatID, again.ChatID)
	assert.True(t, again.Reused)
	assert.NotEqual(t, first.ChatID, h.startChat("default", uuid.NewString()).ChatID)
}

// TestRESTTypedAnswers answers a question and an approval by typing, as
// ChatUI does: over /input without a request id.
func TestRESTTypedAnswers(t *testing.T) {
	h := start(t, testConfig(t))
	chat := h.startChat("default", "").ChatID
	c := h.dialAs(chat, "e1", "u1")

	h.input(chat, `{"message":"ask me something"}`)
	frames := c.until(ag2api.TypeChatInputRequest)
	require.GreaterOrEqual(t, len(frames), 2)
	prompt := frames[len(frames)-2]
	assert.Equal(t, ag2api.TypeChatText, prompt.typ, "the question is also shown as a message: %v", types(frames))
	assert.Equal(t, "What's your name?", prompt.str("content"))
	req := frames[len(frames)-1].msg.(ag2api.InputRequest).Data
	a := h.input(chat, `{"message":"Ada"}`)
	assert.Equal(t, "answer", a.Kind)
	assert.Equal(t, req.RequestID, a.RequestID)
	frames = c.turn()
	require.Len(t, ofType(frames, ag2api.TypeChatInputAck), 1)
	texts := ofType(frames, ag2api.TypeChatText)
	require.NotEmpty(t, texts)
	assert.Equal(t, "Hello, Ada!", texts[len(texts)-1].str("content"))

	h.input(chat, `{"message":"make a file"}`)
	frames = c.until(ag2api.TypeChatInputRequest)
	req = frames[len(frames)-1].msg.(ag2api.InputRequest).Data
	assert.Contains(t, h.fails(http.StatusBadRequest, http.MethodPost, "/chat/e1/"+chat+"/u1/input", `{"message":"perhaps"}`),
		"still pending", "text that is no answer to an approval is refused")
	a = h.input(chat, `{"message":"yes","input_request_id":"`+req.RequestID+`"}`)
	assert.Equal(t, "answer", a.Kind)
	frames = c.turn()
	resp := ofType(frames, ag2api.TypeChatToolResponse)
	require.Len(t, resp, 1)
	var top struct {
		Success *bool `json:"success"`
	}
	require.NoError(t, json.Unmarshal(resp[0].raw, &top))
	require.NotNil(t, top.Success, "ChatUI reads success at the top level: %s", resp[0].raw)
	assert.True(t, *top.Success)
	_, err := os.Stat(filepath.Join(h.cfg.Workdir, "made.txt"))
	assert.NoError(t, err, "the approved command ran")
	assert.Equal(t, "completed", frames[len(frames)-1].str("reason"))
}

// TestRESTUIToolAnswered renders a UI tool as ChatUI does and answers it
// over /api/ui-tool/submit.
func TestRESTUIToolAnswered(t *testing.T) {
	h := start(t, testConfig(t))
	chat := h.startChat("default", "").ChatID
	c := h.dialAs(chat, "e1", "u1")
	h.input(chat, `{"message":"show form"}`)
	frames := c.until(ag2api.TypeUIToolEvent)
	call := frames[len(frames)-2]
	require.Equal(t, ag2api.TypeChatToolCall, call.typ, "%v", types(frames))
	var top struct {
		IsUITool      bool   `json:"is_ui_tool"`
		ComponentType string `json:"component_type"`
		UIToolID      string `json:"ui_tool_id"`
		WorkflowName  string `json:"workflow_name"`
		Corr          string `json:"corr"`
	}
	require.NoError(t, json.Unmarshal(call.raw, &top))
	assert.True(t, top.IsUITool)
	assert.Equal(t, "AgentAPIKeyInput", top.ComponentType)
	assert.Equal(t, "AgentAPIKeyInput", top.UIToolID)
	assert.Equal(t, "default", top.WorkflowName)
	ev := frames[len(frames)-1].msg.(ag2api.UIToolEvent).Data
	assert.Equal(t, "AgentAPIKeyInput", ev.UIToolID)
	assert.Equal(t, top.Corr, ev.EventID)
	assert.Equal(t, "inline", ev.Display)
	assert.True(t, ev.AwaitingResponse)
	assert.JSONEq(t, `{"service":"openai","description":"I need your API key"}`, string(ev.Payload))

	var sub struct {
		ChatID    string `json:"chat_id"`
		RequestID string `json:"request_id"`
	}
	h.ok(http.MethodPost, "/api/ui-tool/submit", `{"event_id":"`+ev.EventID+`","response_data":{"key":"sk-1"}}`,
		ag2restapi.ValidateSubmitResponseJSON, &sub)
	assert.Equal(t, chat, sub.ChatID)
	frames = c.turn()
	resp := ofType(frames, ag2api.TypeChatToolResponse)
	require.Len(t, resp, 1)
	assert.JSONEq(t, `{"key":"sk-1"}`, resp[0].str("content"), "the component's data is the tool's result")
	assert.True(t, resp[0].data["success"].(bool))

	h.fails(http.StatusNotFound, http.MethodPost, "/api/ui-tool/submit", `{"event_id":"`+ev.EventID+`","response_data":{}}`)
}

// TestRESTUserInputFallback answers a question over ChatUI's fallback.
func TestRESTUserInputFallback(t *testing.T) {
	h := start(t, testConfig(t))
	chat := h.startChat("default", "").ChatID
	c := h.dialAs(chat, "e1", "u1")
	h.input(chat, `{"message":"ask me something"}`)
	frames := c.until(ag2api.TypeChatInputRequest)
	req := frames[len(frames)-1].msg.(ag2api.InputRequest).Data
	var sub struct {
		RequestID string `json:"request_id"`
	}
	h.ok(http.MethodPost, "/api/user-input/submit", `{"input_request_id":"`+req.RequestID+`","user_input":"Grace"}`,
		ag2restapi.ValidateSubmitResponseJSON, &sub)
	assert.Equal(t, req.RequestID, sub.RequestID)
	texts := ofType(c.turn(), ag2api.TypeChatText)
	require.NotEmpty(t, texts)
	assert.Equal(t, "Hello, Grace!", texts[len(texts)-1].str("content"))
	h.fails(http.StatusNotFound, http.MethodPost, "/api/user-input/submit", `{"input_request_id":"`+req.RequestID+`","user_input":"again"}`)
}

func TestRESTHostileInput(t *testing.T) {
	h := start(t, testConfig(t))
	chat := h.startChat("default", "").ChatID
	in := "/chat/e1/" + chat + "/u1/input"
	for _, tc := range []struct {
		name, method, path, body, want string
		status                         int
	}{
		{"bad JSON", http.MethodPost, in, `{"message":`, "invalid request body", 400},
		{"wrong type", http.MethodPost, in, `{"message":42}`, "/message", 400},
		{"missing field", http.MethodPost, in, `{"text":"hi"}`, "/message", 400},
		{"not an object", http.MethodPost, in, `["hi"]`, "invalid request body", 400},
		{"blank turn", http.MethodPost, in, `{"message":"   "}`, "empty", 400},
		{"both ids differ", http.MethodPost, in, `{"message":"x","request_id":"a","input_request_id":"b"}`, "different", 400},
		{"unknown request", http.MethodPost, in, `{"message":"x","request_id":"input_never"}`, "pending request", 404},
		{"bad chat id", http.MethodPost, "/chat/e1/a%20b/u1/input", `{"message":"hi"}`, "chat_id", 400},
		{"control character", http.MethodPost, "/chat/e%01/" + chat + "/u1/input", `{"message":"hi"}`, "enterprise_id", 400},
		{"unknown workflow", http.MethodPost, in, `{"message":"hi","workflow_name":"nope"}`, "not found", 404},
		{"start without user", http.MethodPost, "/api/chats/e1/default/start", `{}`, "/user_id", 400},
		{"start of no workflow", http.MethodPost, "/api/chats/e1/nope/start", `{"user_id":"u1"}`, "not found", 404},
		{"exists of no workflow", http.MethodGet, "/api/chats/exists/e1/nope/" + chat, "", "not found", 404},
		{"ui tool without id", http.MethodPost, "/api/ui-tool/submit", `{"response_data":{}}`, "/event_id", 400},
		{"ui tool unknown", http.MethodPost, "/api/ui-tool/submit", `{"event_id":"ui_never","response_data":{}}`, "no pending request", 404},
		{"user input wrong type", http.MethodPost, "/api/user-input/submit", `{"input_request_id":"x","user_input":false}`, "/user_input", 400},
		{"user input unknown", http.MethodPost, "/api/user-input/submit", `{"input_request_id":"x","user_input":"y"}`, "no pending request", 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Contains(t, h.fails(tc.status, tc.method, tc.path, tc.body), tc.want)
		})
	}
	t.Run("not JSON", func(t *testing.T) {
		assert.Contains(t, h.fails(400, http.MethodPost, in, `{"message":"hi"}`, "Content-Type", "text/plain"), "Content-Type")
	})
	t.Run("oversize body", func(t *testing.T) {
		big := `{"message":"` + strings.Repeat("a", 2<<20) + `"}`
		assert.Contains(t, h.fails(400, http.MethodPost, in, big), "exceeds")
	})
	t.Run("another enterprise's chat", func(t *testing.T) {
		h.input(chat, `{"message":"echo mine"}`)
		h.fails(404, http.MethodPost, "/chat/e2/"+chat+"/u1/input", `{"message":"echo theirs"}`)
		h.fails(404, http.MethodPost, "/chat/e1/"+chat+"/u2/input", `{"message":"echo theirs"}`)
	})
}

func TestRESTAnotherPrincipalsChat(t *testing.T) {
	cfg, alice, bob := keysConfig(t)
	h := start(t, cfg)
	status, _ := h.call(http.MethodGet, "/api/workflows", "")
	assert.Equal(t, http.StatusUnauthorized, status, "the REST calls need a credential as the socket does")

	var s startAnswer
	status, b := h.call(http.MethodPost, "/api/chats/e1/default/start", `{"user_id":"u1"}`, "Authorization", "Bearer "+alice)
	require.Equal(t, http.StatusOK, status, "%s", b)
	require.NoError(t, json.Unmarshal(b, &s))
	status, b = h.call(http.MethodPost, "/chat/e1/"+s.ChatID+"/u1/input", `{"message":"echo alice"}`, "Authorization", "Bearer "+alice)
	require.Equal(t, http.StatusOK, status, "%s", b)

	status, b = h.call(http.MethodPost, "/chat/e1/"+s.ChatID+"/u1/input", `{"message":"echo bob"}`, "Authorization", "Bearer "+bob)
	assert.Equal(t, http.StatusNotFound, status, "another principal's chat does not exist for bob: %s", b)
	require.NoError(t, ag2restapi.ValidateErrorJSON(b))
	status, b = h.call(http.MethodGet, "/api/chats/exists/e1/default/"+s.ChatID, "", "Authorization", "Bearer "+bob)
	require.Equal(t, http.StatusOK, status, "%s", b)
	assert.JSONEq(t, `{"exists":false,"chat_id":"`+s.ChatID+`"}`, string(b))
}

// TestRESTCrossOrigin is ChatUI on its own origin: allowed with
// --allowed-origins, refused otherwise.
func TestRESTCrossOrigin(t *testing.T) {
	const chatUI = "http://localhost:3000"
	h := start(t, testConfig(t, "--allowed-origins", chatUI))
	status, _ := h.call(http.MethodPost, "/api/chats/e1/default/start", `{"user_id":"u1"}`, "Origin", "http://evil.example")
	assert.Equal(t, http.StatusForbidden, status, "an origin not allowed cannot start a chat")
	status, b := h.call(http.MethodPost, "/api/chats/e1/default/start", `{"user_id":"u1"}`, "Origin", chatUI)
	assert.Equal(t, http.StatusOK, status, "%s", b)

	req, err := http.NewRequest(http.MethodOptions, "http://"+h.srv.Addr("main")+"/chat/e1/c1/u1/input", nil)
	require.NoError(t, err)
	req.Header.Set("Origin", chatUI)
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "content-type")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = res.Body.Close()
	assert.Equal(t, chatUI, res.Header.Get("Access-Control-Allow-Origin"), "ChatUI's preflight is answered")
}

func keysConfig(t *testing.T) (cfg config.Config, alice, bob string) {
	t.Helper()
	alice, bob = "ak-"+uuid.NewString(), "bk-"+uuid.NewString()
	file := filepath.Join(t.TempDir(), "keys")
	require.NoError(t, os.WriteFile(file, []byte("alice="+alice+"\nbob="+bob+"\n"), 0o600))
	return testConfig(t, "--auth", "keys", "--api-keys-file", file), alice, bob
}

// TestRESTOnTheOwnListener: --listen ag2= serves the REST calls too, and a
// chat started there is streamed on the listener's root socket path.
func TestRESTOnTheOwnListener(t *testing.T) {
	h := start(t, testConfig(t, "--listen", "ag2=127.0.0.1:0"))
	base := "http://" + h.srv.Addr("ag2")
	res, err := http.Post(base+"/api/chats/e1/default/start", "application/json", strings.NewReader(`{"user_id":"u1"}`))
	require.NoError(t, err)
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	_ = res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode, "%s", b)
	require.NoError(t, ag2restapi.ValidateStartChatResponseJSON(b))
	var s startAnswer
	require.NoError(t, json.Unmarshal(b, &s))
	c := dialURL(t, "ws://"+h.srv.Addr("ag2")+"/default/e1/"+s.ChatID+"/u1")
	res, err = http.Post(base+"/chat/e1/"+s.ChatID+"/u1/input", "application/json", strings.NewReader(`{"message":"echo own listener"}`))
	require.NoError(t, err)
	_ = res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	texts := ofType(c.turn(), ag2api.TypeChatText)
	require.Len(t, texts, 1)
	assert.Equal(t, "You said: echo own listener", texts[0].str("content"))
	res, err = http.Get(base + "/api/workflows/default/transport")
	require.NoError(t, err)
	_ = res.Body.Close()
	assert.Equal(t, http.StatusOK, res.StatusCode, "the transport path does not clash with the root socket path")
}

// TestWorkflowsValidatorChecksEveryEntry: the document's Workflows map
// (additionalProperties: WorkflowConfig) is checked entry by entry.
func TestWorkflowsValidatorChecksEveryEntry(t *testing.T) {
	good := `{"human_in_the_loop":true,"startup_mode":"UserDriven","transport":"websocket","agents":[]}`
	require.NoError(t, ag2restapi.ValidateWorkflowsJSON([]byte(`{"a":`+good+`,"b":`+good+`}`)))
	err := ag2restapi.ValidateWorkflowsJSON([]byte(`{"a":` + good + `,"b/c":{"human_in_the_loop":"yes","startup_mode":"UserDriven","transport":"websocket","agents":[]}}`))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "/b~1c/human_in_the_loop")
	err = ag2restapi.ValidateWorkflowsJSON([]byte(`{"a":{"startup_mode":"UserDriven","transport":"websocket","agents":[]}}`))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "/a/human_in_the_loop")
}

// TestRESTAnswerWithNoSocketOpen: /input finds the pending question in the
// chat's events when no socket of the chat is open on the server.
func TestRESTAnswerWithNoSocketOpen(t *testing.T) {
	h := start(t, testConfig(t))
	chat := h.startChat("default", "").ChatID
	c := h.dialAs(chat, "e1", "u1")
	h.input(chat, `{"message":"ask me something"}`)
	frames := c.until(ag2api.TypeChatInputRequest)
	req := frames[len(frames)-1].msg.(ag2api.InputRequest).Data
	c.close()

	a := h.input(chat, `{"message":"Lin"}`)
	assert.Equal(t, "answer", a.Kind)
	assert.Equal(t, req.RequestID, a.RequestID)
	r := h.dialAs(chat, "e1", "u1")
	r.resume(req.Seq)
	var texts []got
	for {
		g := r.next()
		if g.typ == ag2api.TypeChatText {
			texts = append(texts, g)
		}
		if g.typ == ag2api.TypeChatRunComplete {
			break
		}
	}
	require.NotEmpty(t, texts)
	assert.Equal(t, "Hello, Lin!", texts[len(texts)-1].str("content"))
}
