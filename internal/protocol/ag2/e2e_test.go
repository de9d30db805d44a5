package ag2_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/generated/ag2api"
)

// A ChatUI-style client runs a multi-agent workflow end to end: streaming,
// speaker changes, an approval, a UI component answered inline, an
// artifact patched, a disconnect and resume with nothing lost or doubled,
// and usage with cost.
func TestStudioWorkflowEndToEnd(t *testing.T) {
	h := start(t, testConfig(t, "--workflows", "testdata/workflows"))
	const chat = "studio-chat"
	dial := func() *client {
		c := dialURL(t, h.url("studio", "acme", chat, "alice"))
		c.chat = chat
		return c
	}
	c := dial()
	c.say("make a poster for the open day")
	var all []got
	lastSeq, reconnected, patched := 0, false, false
	done := map[string]bool{}
	for {
		f := c.next()
		if f.typ == ag2api.TypeChatResumeBoundary {
			continue
		}
		all = append(all, f)
		if f.seq > 0 {
			lastSeq = f.seq
		}
		switch m := f.msg.(type) {
		case ag2api.InputRequest:
			if done[m.Data.RequestID] {
				continue
			}
			done[m.Data.RequestID] = true
			assert.Contains(t, m.Data.Prompt, "mkdir -p poster")
			if assert.NotNil(t, m.Data.Agent) {
				assert.Equal(t, "designer", *m.Data.Agent, "the approval names the agent whose call waits")
			}
			c.answer(m.Data.RequestID, "approve")
		case ag2api.ToolCall:
			key := m.Data.Corr + string(m.Data.Payload)
			if !m.Data.AwaitingResponse || done[key] {
				continue
			}
			done[key] = true
			switch {
			case m.Data.ComponentType == "StylePicker":
				// Drop the socket with the component on screen, come
				// back and resume from the last frame held.
				if !reconnected {
					reconnected = true
					c.close()
					c = dial()
					c.resumeKeeping(lastSeq)
				}
				c.send(ag2api.InlineComponentResult{Type: ag2api.TypeInlineComponentResult, Corr: m.Data.Corr, Data: json.RawMessage(`"bold"`)})
			case m.Data.ComponentType == "LayoutEditor" && !patched:
				patched = true
				c.send(ag2api.ArtifactPatch{Type: ag2api.TypeArtifactPatch, Corr: m.Data.Corr,
					Patch: []json.RawMessage{json.RawMessage(`{"op":"add","path":"/blocks/-","value":"date"}`)}})
			case m.Data.ComponentType == "LayoutEditor":
				assert.JSONEq(t, `{"title":"Poster","blocks":["headline","date"]}`, string(m.Data.Payload))
				c.send(ag2api.InlineComponentResult{Type: ag2api.TypeInlineComponentResult, Corr: m.Data.Corr, Data: m.Data.Payload})
			}
		}
		if f.typ == ag2api.TypeChatRunComplete {
			break
		}
	}
	require.True(t, reconnected)
	// Nothing doubled, nothing out of order: the frames with a seq, across
	// the reconnect, strictly increase.
	checkSeqs(t, all)

	selected, spoke := speakers(all)
	assert.Equal(t, []string{"designer", "writer"}, selected)
	assert.Equal(t, []string{"designer", "writer"}, spoke)
	var designer, writer strings.Builder
	for _, p := range ofType(all, ag2api.TypeChatPrint) {
		d := p.msg.(ag2api.Print).Data
		if d.Agent == "writer" {
			writer.WriteString(d.Content)
		} else {
			designer.WriteString(d.Content)
		}
	}
	assert.Equal(t, "Copy: Come to the studio.", writer.String())
	texts := ofType(all, ag2api.TypeChatText)
	var designed string
	for _, f := range texts {
		if d := f.msg.(ag2api.Text).Data; d.Agent == "designer" && strings.HasPrefix(d.Content, "Design done") {
			designed = d.Content
		}
	}
	assert.Equal(t, `Design done with {"title":"Poster","blocks":["headline","date"]}.`, designed)
	usage := ofType(all, ag2api.TypeChatUsageSummary)
	require.NotEmpty(t, usage)
	u := usage[len(usage)-1].msg.(ag2api.UsageSummary).Data
	assert.Equal(t, 300+350+400+450+500, u.PromptTokens)
	assert.Equal(t, 40+20+30+20+10, u.CompletionTokens)
	require.NotNil(t, u.Cost)
	assert.InDelta(t, float64(u.PromptTokens)*1e-6+float64(u.CompletionTokens)*2e-6, *u.Cost, 1e-9)
	assert.Equal(t, "completed", all[len(all)-1].msg.(ag2api.RunComplete).Data.Reason)
	_, err := statFile(h, "poster")
	assert.NoError(t, err, "the approved command ran")
}
