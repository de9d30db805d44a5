package agentloop_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/generated/agentloopapi"
)

// yes runs the command; the call's item follows the review, as the
// document's approval sequence shows.
func TestApprovalYes(t *testing.T) {
	h := start(t, testConfig(t))
	c := h.dial("")
	c.say("make a file")
	got := until[agentloopapi.ApprovalRequestMessage](c)
	assert.Equal(t, []string{"loading_state/true", "message/assistant", "approval_request"}, kinds(got))
	req := got[2].(agentloopapi.ApprovalRequestMessage).Payload
	assert.Equal(t, []string{"touch", "made.txt"}, req.Command)
	assert.Nil(t, req.ApplyPatch)
	assert.False(t, h.exists("made.txt"), "nothing runs before the review")

	c.review("yes")
	frames := c.turn()
	assert.Equal(t, []string{"local_shell_call", "local_shell_call_output", "message/assistant",
		"loading_state/false", "agent_finished", "context_info"}, kinds(frames))
	assert.Equal(t, "made.txt exists now.", messageText(items(frames)[2]))
	assert.True(t, h.exists("made.txt"))
}

// no-continue gives the model "aborted" and the user's message; the turn
// goes on.
func TestApprovalNoContinue(t *testing.T) {
	h := start(t, testConfig(t))
	c := h.dial("")
	c.say("make a file")
	c.expectApproval()
	m := reviewMsg("no-continue")
	why := "use the editor instead"
	m.Payload.CustomDenyMessage = &why
	c.send(m)
	frames := c.turn()
	its := items(frames)
	require.Len(t, its, 3)
	o := decodeOutput(t, its[1].(agentloopapi.LocalShellCallOutputItem).Output)
	assert.Equal(t, "aborted\nThe user denied this call: use the editor instead", o.Output)
	assert.Equal(t, 1, *o.Metadata.ExitCode)
	assert.Equal(t, "Not run: aborted\nThe user denied this call: use the editor instead", messageText(its[2]))
	assert.False(t, h.exists("made.txt"))

	// Without a message the model gets the default one.
	c.say("make a file")
	c.expectApproval()
	c.review("no-continue")
	its = items(c.turn())
	assert.Contains(t, messageText(its[2]), "Not run: aborted\nThe user denied this call. Continue without it")
}

// no-exit stops the turn: loading_state false, agent_finished.
func TestApprovalNoExit(t *testing.T) {
	h := start(t, testConfig(t))
	c := h.dial("")
	c.say("make a file")
	c.expectApproval()
	c.review("no-exit")
	frames := c.turn()
	assert.Equal(t, []string{"local_shell_call", "local_shell_call_output", "loading_state/false", "agent_finished", "context_info"}, kinds(frames))
	assert.False(t, h.exists("made.txt"))
	c.say("echo next turn")
	assert.Equal(t, "You said: echo next turn", messageText(items(c.turn())[0]))
}

// explain sends an explanation as an assistant item, then the same
// approval_request again.
func TestApprovalExplain(t *testing.T) {
	h := start(t, testConfig(t))
	c := h.dial("")
	c.say("make a file")
	first := c.expectApproval()
	c.review("explain")
	got := until[agentloopapi.ApprovalRequestMessage](c)
	assert.Equal(t, []string{"message/assistant", "approval_request"}, kinds(got))
	assert.Equal(t, "This command creates an empty file in the working folder.", messageText(items(got)[0]))
	assert.Equal(t, first, got[1].(agentloopapi.ApprovalRequestMessage).Payload)
	c.review("yes")
	frames := c.turn()
	assert.Equal(t, "made.txt exists now.", messageText(items(frames)[2]))
	assert.True(t, h.exists("made.txt"))
}

// always runs the command and remembers its program for the thread: in
// its log, so across a restart, and in no other thread.
func TestApprovalAlwaysSurvivesRestart(t *testing.T) {
	cfg := testConfig(t)
	h := start(t, cfg)
	c := h.dial("")
	thread := c.thread
	c.say("make a file")
	c.expectApproval()
	c.review("always")
	var notices []string
	for _, it := range items(c.turn()) {
		if m, ok := it.(agentloopapi.MessageItem); ok && m.Role == "system" {
			notices = append(notices, messageText(m))
		}
	}
	assert.Contains(t, notices, "Approved always: commands that run only touch now run without asking in this conversation.",
		"the answer's notice says what is remembered")
	assert.True(t, h.exists("made.txt"))

	c.say("another file")
	frames := c.turn()
	assert.NotContains(t, kinds(frames), "approval_request", "touch is remembered")
	assert.True(t, h.exists("another.txt"))

	c.close()
	h.shutdown()
	require.NoError(t, removeFile(cfg.Workdir, "another.txt"))
	h = startNoLeakCheck(t, cfg)
	c = h.dial(thread)
	replayed := c.turnsReplayed(2)
	assert.Equal(t, 0, countKind(replayed, "approval_request"), "a replay asks nothing that was answered")
	assert.Contains(t, kinds(replayed), "local_shell_call", "the command asked about is in the replay")
	c.say("another file")
	frames = c.turn()
	assert.NotContains(t, kinds(frames), "approval_request", "touch is still remembered after a restart")
	assert.True(t, h.exists("another.txt"))

	other := h.dial("")
	other.say("another file")
	assert.Equal(t, []string{"touch", "another.txt"}, other.expectApproval().Command, "another thread asks")
	other.review("no-exit")
	other.turn()
}

// A patch asks with ["apply_patch", patch] and applyPatch; yes applies it.
// An edited applyPatch is checked (an invalid one is refused and the
// request stays pending), then applied instead of the model's.
func TestApprovalPatches(t *testing.T) {
	h := start(t, testConfig(t))
	h.write("greeting.txt", "hello\n")
	c := h.dial("")

	c.say("patch the greeting")
	req := c.expectApproval()
	const patch = "*** Begin Patch\n*** Update File: greeting.txt\n@@\n-hello\n+hello, world\n*** End Patch"
	assert.Equal(t, []string{"apply_patch", patch}, req.Command)
	require.NotNil(t, req.ApplyPatch)
	assert.Equal(t, patch, req.ApplyPatch.Patch)

	bad := reviewMsg("yes")
	bad.Payload.ApplyPatch = &agentloopapi.ApplyPatchCommand{Patch: "*** Begin Patch\n*** Frobnicate: x\n*** End Patch"}
	c.send(bad)
	msg, details := c.expectError()
	assert.Contains(t, msg, "The edited patch is invalid")
	assert.Contains(t, msg, "still pending")
	assert.Equal(t, "invalid", details["code"])
	assert.Equal(t, "hello\n", h.read("greeting.txt"))

	edited := reviewMsg("yes")
	const mine = "*** Begin Patch\n*** Update File: greeting.txt\n@@\n-hello\n+hello, edited\n*** End Patch"
	edited.Payload.ApplyPatch = &agentloopapi.ApplyPatchCommand{Patch: mine}
	c.send(edited)
	frames := c.turn()
	assert.Equal(t, "hello, edited\n", h.read("greeting.txt"))
	its := items(frames)
	require.Len(t, its, 3)
	call := its[0].(agentloopapi.FunctionCallItem)
	assert.Equal(t, "apply_patch", call.Name)
	o := decodeOutput(t, its[1].(agentloopapi.FunctionCallOutputItem).Output)
	assert.Contains(t, o.Output, "The user edited the patch before approving it")
	assert.Contains(t, o.Output, mine)
	assert.Equal(t, 0, *o.Metadata.ExitCode)
	assert.Equal(t, "Patched.", messageText(its[2]))

	// The shell form asks the same way and applies without a shell.
	c.say("shell patch")
	req = c.expectApproval()
	require.NotNil(t, req.ApplyPatch)
	assert.Equal(t, "apply_patch", req.Command[0])
	c.review("always")
	frames = c.turn()
	assert.Equal(t, "added by the shell form\n", h.read("added.txt"))
	assert.Equal(t, "local_shell_call", kinds(frames)[0])
	assert.Equal(t, "apply_patch", items(frames)[0].(agentloopapi.LocalShellCallItem).Action.Command[0])

	// always remembered apply_patch: the tool form now runs without asking.
	h.write("greeting.txt", "hello\n")
	c.say("patch the greeting")
	frames = c.turn()
	assert.NotContains(t, kinds(frames), "approval_request")
	assert.Equal(t, "hello, world\n", h.read("greeting.txt"))
}

// A command request refuses an applyPatch edit.
func TestApprovalPatchEditOfCommand(t *testing.T) {
	h := start(t, testConfig(t))
	c := h.dial("")
	c.say("make a file")
	c.expectApproval()
	m := reviewMsg("yes")
	m.Payload.ApplyPatch = &agentloopapi.ApplyPatchCommand{Patch: "*** Begin Patch\n*** Add File: x\n+x\n*** End Patch"}
	c.send(m)
	msg, _ := c.expectError()
	assert.Contains(t, msg, "pending approval request is for a command")
	c.review("yes")
	c.turn()
	assert.True(t, h.exists("made.txt"))
	assert.False(t, h.exists("x"))
}
