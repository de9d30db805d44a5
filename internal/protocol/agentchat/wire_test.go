package agentchat

import (
	"testing"

	"github.com/agentwire/agentwire/generated/agentchatapi"
	"github.com/agentwire/agentwire/internal/protocol/wiretest"
)

var codec = wiretest.Codec{
	Decode:         func(b []byte) (any, error) { return agentchatapi.Decode(b) },
	DecodeOutbound: func(b []byte) (any, error) { return agentchatapi.DecodeOutbound(b) },
	Encode:         func(m any) ([]byte, error) { return agentchatapi.Encode(m.(agentchatapi.Message)) },
}

func TestWireExamples(t *testing.T) { wiretest.Examples(t, "testdata/wire/examples.json", codec) }

func TestWireInvalidFrames(t *testing.T) {
	wiretest.InvalidFrames(t, "testdata/wire/invalid.json", codec)
}

func FuzzDecode(f *testing.F) { wiretest.Fuzz(f, "testdata/wire", "inbound", codec) }

func FuzzDecodeOutbound(f *testing.F) { wiretest.Fuzz(f, "testdata/wire", "outbound", codec) }

func TestWireDocumentExamples(t *testing.T) {
	wiretest.DocumentExamples(t, "../../../asyncapi/agentchat.yaml", codec)
}
