package ag2_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/generated/ag2api"
)

// workflowConfig is a server on the built-in scripted scenario, which
// plays the built-in dev-team workflow, with dir's workflows.
func workflowConfig(t *testing.T, files map[string]string) (dir string, args []string) {
	t.Helper()
	dir = t.TempDir()
	for name, content := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	return dir, []string{"--scenario", "", "--workflows", dir}
}

// devTeam is the built-in dev-team workflow with another selection.
func devTeam(selection string) string {
	return `speaker_selection: ` + selection + `
max_rounds: 6
agents:
  - name: planner
    description: Breaks the user's request into a short numbered plan. Speaks first.
    system: |-
      You are the planner of a small software team (planner, coder, reviewer).
      Read the user's request and write a short numbered plan for the coder.
      Do not write code. If the request needs no work, say TERMINATE.
    tools: [ls, glob, grep, read]
  - name: coder
    description: Implements the planner's plan in the working folder and reports what changed.
    system: |-
      You are the coder of a small software team (planner, coder, reviewer).
      Carry out the planner's latest plan with your tools and say briefly
      what you changed.
    tools: [ls, glob, grep, read, write_file, edit, apply_patch, bash]
  - name: reviewer
    description: Reviews the coder's work against the plan and says whether it is done.
    system: |-
      You are the reviewer of a small software team (planner, coder, reviewer).
      Check the coder's work against the plan. Say what is wrong, or that the
      work is done.
    tools: [ls, glob, grep, read]
`
}

// speakers are the agents of the chat.select_speaker frames, and the
// agents of the chat.text frames.
func speakers(frames []got) (selected, spoke []string) {
	for i, f := range frames {
		switch m := f.msg.(type) {
		case ag2api.SelectSpeaker:
			selected = append(selected, m.Data.Agent)
		case ag2api.Text:
			if i+1 < len(frames) && frames[i+1].typ == ag2api.TypeChatInputRequest && frames[i+1].seq == f.seq {
				continue // an input request's prompt, shown as a message for ChatUI
			}
			// An agent's turn may have several messages (before and after
			// its tool calls).
			if len(spoke) == 0 || spoke[len(spoke)-1] != m.Data.Agent {
				spoke = append(spoke, m.Data.Agent)
			}
		}
	}
	return selected, spoke
}

func TestWorkflowRoundRobin(t *testing.T) {
	_, args := workflowConfig(t, nil)
	h := start(t, testConfig(t, args...))
	c := dialURL(t, h.url("dev-team", "e1", "team-chat", "u1"))
	c.chat = "team-chat"
	c.say("add a greeting file")
	frames := c.turn()
	checkSeqs(t, frames)
	selected, spoke := speakers(frames)
	assert.Equal(t, []string{"planner", "coder", "reviewer"}, selected)
	assert.Equal(t, []string{"planner", "coder", "reviewer"}, spoke)
	for _, p := range ofType(frames, ag2api.TypeChatPrint) {
		assert.NotEqual(t, "assistant", p.msg.(ag2api.Print).Data.Agent, "every chunk names its agent")
	}
	assert.Equal(t, "completed", frames[len(frames)-1].msg.(ag2api.RunComplete).Data.Reason)
}

func TestWorkflowAutoSelection(t *testing.T) {
	_, args := workflowConfig(t, map[string]string{"auto-team.yaml": devTeam("auto")})
	h := start(t, testConfig(t, args...))
	c := dialURL(t, h.url("auto-team", "e1", "auto-chat", "u1"))
	c.chat = "auto-chat"
	c.say("add a greeting file")
	frames := c.turn()
	selected, _ := speakers(frames)
	assert.Equal(t, []string{"planner", "coder", "reviewer"}, selected)
	assert.Equal(t, "completed", frames[len(frames)-1].msg.(ag2api.RunComplete).Data.Reason)
}

func TestWorkflowManualSelectionThroughInputRequests(t *testing.T) {
	_, args := workflowConfig(t, map[string]string{"manual-team.yaml": devTeam("manual")})
	h := start(t, testConfig(t, args...))
	c := dialURL(t, h.url("manual-team", "e1", "manual-chat", "u1"))
	c.chat = "manual-chat"
	c.say("add a greeting file")
	frames := c.until(ag2api.TypeChatInputRequest)
	req := frames[len(frames)-1].msg.(ag2api.InputRequest).Data
	assert.Contains(t, req.Prompt, "Who speaks next?")
	c.answer(req.RequestID, "reviewer")
	frames = c.until(ag2api.TypeChatInputRequest)
	selected, spoke := speakers(frames)
	assert.Equal(t, []string{"reviewer"}, selected)
	assert.Equal(t, []string{"reviewer"}, spoke)
	require.Len(t, ofType(frames, ag2api.TypeChatInputAck), 1)
	req = frames[len(frames)-1].msg.(ag2api.InputRequest).Data
	c.answer(req.RequestID, "done")
	frames = c.turn()
	assert.Equal(t, "completed", frames[len(frames)-1].msg.(ag2api.RunComplete).Data.Reason)
}

func TestWorkflowThatDoesNotLoadIsAgentInitializationFailed(t *testing.T) {
	_, args := workflowConfig(t, map[string]string{"broken.yaml": "speaker_selection: sometimes\nagents: []\n"})
	h := start(t, testConfig(t, args...))
	c := dialURL(t, h.url("broken", "e1", "broken-chat", "u1"))
	frames := c.expectClosed(websocket.StatusPolicyViolation)
	require.Len(t, frames, 1)
	e := frames[0].msg.(ag2api.ChatError).Data
	assert.Equal(t, "AGENT_INITIALIZATION_FAILED", errCode(e))
	assert.True(t, strings.Contains(e.Message, "broken"), e.Message)
}
