package agentloop

import (
	"testing"

	"github.com/agentwire/agentwire/generated/agentloopapi"
	"github.com/agentwire/agentwire/internal/protocol/wiretest"
)

var codec = wiretest.Codec{
	Decode:           func(b []byte) (any, error) { return agentloopapi.Decode(b) },
	DecodeOutbound:   func(b []byte) (any, error) { return agentloopapi.DecodeOutbound(b) },
	Encode:           func(m any) ([]byte, error) { return agentloopapi.Encode(m.(agentloopapi.Message)) },
	ValidateInbound:  agentloopapi.ValidateInbound,
	ValidateOutbound: agentloopapi.ValidateOutbound,
}

func TestWireExamples(t *testing.T) { wiretest.Examples(t, "testdata/wire/examples.json", codec) }

func TestWireInvalidFrames(t *testing.T) {
	wiretest.InvalidFrames(t, "testdata/wire/invalid.json", codec)
}

func FuzzDecode(f *testing.F) { wiretest.Fuzz(f, "testdata/wire", "inbound", codec) }

func FuzzDecodeOutbound(f *testing.F) { wiretest.Fuzz(f, "testdata/wire", "outbound", codec) }

func TestWireDocumentExamples(t *testing.T) {
	wiretest.DocumentExamples(t, "../../../asyncapi/agentloop.yaml", codec)
}
