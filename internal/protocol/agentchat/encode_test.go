package agentchat

import (
	"testing"

	"github.com/agentwire/agentwire/generated/agentchatapi"
)

// FuzzEncodeAgentMessage: the agent_message frame the hub writes itself is
// the generated encoder's, byte for byte, whatever the text.
func FuzzEncodeAgentMessage(f *testing.F) {
	f.Add("Hello, <world> & \"you\"\n")
	f.Add("\x00\x1f\x7f\u2028\u2029 tab\t")
	f.Add("日本語 🙂")
	f.Add("\xff\xfebad")
	f.Fuzz(func(t *testing.T, text string) {
		want, err := agentchatapi.Encode(agentchatapi.NewAgentMessageEvent(text))
		if err != nil {
			t.Fatal(err)
		}
		if got := encodeAgentMessage(text); string(got) != string(want) {
			t.Fatalf("frame %s, generated encoder's %s", got, want)
		}
	})
}
