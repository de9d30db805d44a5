package providers_test

import (
	"encoding/json"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/generated/ag2api"
	"github.com/agentwire/agentwire/internal/llm/llmtest"
	"github.com/agentwire/agentwire/internal/server/servertest"
)

// Over AG2, usage comes from what the provider reports, and its cost from
// the price of the model in use.
func TestAG2UsageFromAnOpenAICompatibleModel(t *testing.T) {
	model := llmtest.NewServer(t, textReply("Hello from the upstream model.", 1200, 30))
	srv := start(t, openAIConfig(t, model.URL, ""), servertest.Options{})
	c := dialAG2(t, srv, "usage-chat", "e1", "u1")
	c.say("hello")
	var usages []ag2api.UsageSummaryData
	for _, f := range c.until(ag2api.TypeChatRunComplete) {
		if u, ok := f.(ag2api.UsageSummary); ok {
			usages = append(usages, u.Data)
		}
	}
	require.Len(t, usages, 1)
	u := usages[0]
	assert.Equal(t, 1200, u.PromptTokens)
	assert.Equal(t, 30, u.CompletionTokens)
	assert.Equal(t, 1230, u.TotalTokens)
	require.NotNil(t, u.Cost)
	assert.InDelta(t, 1200*0.15/1e6+30*0.60/1e6, *u.Cost, 1e-9)
}

// ag2Client is a ChatUI-style AG2 client: it checks every frame it sends
// and receives against the document.
type ag2Client struct {
	socket
	chat string
}

// dialAG2 opens a socket on a chat of the default workflow.
func dialAG2(t *testing.T, srv *servertest.Server, chat, ent, user string) *ag2Client {
	t.Helper()
	u := "ws://" + srv.Addr("main") + "/ws/default/" + url.PathEscape(ent) + "/" + url.PathEscape(chat) + "/" + url.PathEscape(user)
	return &ag2Client{socket: dial(t, u), chat: chat}
}

func (c *ag2Client) send(m ag2api.Message) {
	c.t.Helper()
	b, err := ag2api.Encode(m)
	require.NoError(c.t, err)
	c.write(b, ag2api.ValidateInbound)
}

func (c *ag2Client) say(text string) {
	c.t.Helper()
	c.send(ag2api.UserInputSubmit{Type: ag2api.TypeUserInputSubmit, ChatID: &c.chat, Text: text})
}

// until reads frames up to and including the first of type typ; each
// must decode and carry an RFC 3339 timestamp.
func (c *ag2Client) until(typ string) []ag2api.Outbound {
	c.t.Helper()
	var out []ag2api.Outbound
	for {
		b, err := c.read()
		require.NoError(c.t, err)
		m, err := ag2api.DecodeOutbound(b)
		require.NoError(c.t, err, "DecodeOutbound(%s)", b)
		var env struct {
			Timestamp string `json:"timestamp"`
		}
		require.NoError(c.t, json.Unmarshal(b, &env))
		_, err = time.Parse(time.RFC3339Nano, env.Timestamp)
		require.NoError(c.t, err, "frame timestamp: %s", b)
		out = append(out, m)
		if m.MessageType() == typ {
			return out
		}
	}
}
