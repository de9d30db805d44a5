package ag2_test

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/generated/ag2api"
)

// outboundTypes are the 13 chat.* frames of the document.
var outboundTypes = []string{
	ag2api.TypeChatResumeBoundary, ag2api.TypeChatSelectSpeaker, ag2api.TypeChatPrint, ag2api.TypeChatText,
	ag2api.TypeChatInputRequest, ag2api.TypeChatInputTimeout, ag2api.TypeChatInputAck, ag2api.TypeChatToolCall,
	ag2api.TypeChatToolResponse, ag2api.TypeChatToolProgress, ag2api.TypeChatUsageSummary, ag2api.TypeChatRunComplete,
	ag2api.TypeChatError,
}

// tour plays the ag2-tour scenario as a ChatUI client would, resuming on a
// new socket after the timed-out question, and returns every frame.
func tour(t *testing.T, h *harness, prompt string) []got {
	c := h.dial("")
	c.say(prompt)
	var frames []got
	lastSeq, resumed, patched := 0, false, false
	// Frames are acted on once, live or replayed: a request asked while
	// the client was away comes in the replay.
	done := map[string]bool{}
	for {
		f := c.next()
		frames = append(frames, f)
		if f.seq > 0 {
			lastSeq = f.seq
		}
		switch m := f.msg.(type) {
		case ag2api.InputRequest:
			if done[m.Data.RequestID] {
				continue
			}
			done[m.Data.RequestID] = true
			switch {
			case strings.Contains(m.Data.Prompt, "What is your name?"):
				c.answer(m.Data.RequestID, "Ada")
			case strings.Contains(m.Data.Prompt, "approve"):
				c.answer(m.Data.RequestID, "yes")
			}
		case ag2api.InputTimeout:
			if !resumed {
				resumed = true
				c.close()
				chat := c.chat
				c = h.dial(chat)
				c.resumeKeeping(lastSeq)
			}
		case ag2api.ToolCall:
			key := m.Data.Corr + "/" + string(m.Data.Payload)
			if done[key] || !m.Data.AwaitingResponse {
				continue
			}
			done[key] = true
			switch {
			case m.Data.ComponentType == "ChoiceCard":
				c.send(ag2api.InlineComponentResult{Type: ag2api.TypeInlineComponentResult, Corr: m.Data.Corr, Data: json.RawMessage(`"green"`)})
			case m.Data.ComponentType == "FileDownloadCenter" && !patched:
				patched = true
				c.send(ag2api.ArtifactPatch{Type: ag2api.TypeArtifactPatch, Corr: m.Data.Corr,
					Patch: []json.RawMessage{json.RawMessage(`{"op":"add","path":"/files/-","value":{"name":"notes.md"}}`)}})
			case m.Data.ComponentType == "FileDownloadCenter":
				c.send(ag2api.InlineComponentResult{Type: ag2api.TypeInlineComponentResult, Corr: m.Data.Corr, Data: json.RawMessage(`{"downloaded":2}`)})
			}
		case ag2api.RunComplete:
			return frames
		}
	}
}

func TestAG2TourSendsEveryOutboundType(t *testing.T) {
	h := start(t, testConfig(t, "--scenario", "ag2-tour"))
	frames := tour(t, h, "ag2 tour please")
	seen := map[string]bool{}
	for _, f := range frames {
		seen[f.typ] = true
	}
	var missing []string
	for _, typ := range outboundTypes {
		if !seen[typ] {
			missing = append(missing, typ)
		}
	}
	sort.Strings(missing)
	assert.Empty(t, missing, "the tour sends every chat.* frame")
	last := frames[len(frames)-1].msg.(ag2api.RunComplete).Data
	assert.Equal(t, "completed", last.Reason)
	texts := ofType(frames, ag2api.TypeChatText)
	require.NotEmpty(t, texts)
	assert.Contains(t, texts[len(texts)-1].msg.(ag2api.Text).Data.Content, "That is the tour")
}

func TestAG2TourFromTheBuiltInScenario(t *testing.T) {
	h := start(t, testConfig(t, "--scenario", ""))
	frames := tour(t, h, "demo ag2 tour")
	assert.Equal(t, "completed", frames[len(frames)-1].msg.(ag2api.RunComplete).Data.Reason)
	assert.NotEmpty(t, ofType(frames, ag2api.TypeChatResumeBoundary))
}
