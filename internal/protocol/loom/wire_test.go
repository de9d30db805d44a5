package loom

import (
	"testing"

	"github.com/agentwire/agentwire/generated/loomapi"
	"github.com/agentwire/agentwire/internal/protocol/wiretest"
)

var codec = wiretest.Codec{
	Decode:           func(b []byte) (any, error) { return loomapi.Decode(b) },
	DecodeOutbound:   func(b []byte) (any, error) { return loomapi.DecodeOutbound(b) },
	Encode:           func(m any) ([]byte, error) { return loomapi.Encode(m.(loomapi.Message)) },
	ValidateInbound:  loomapi.ValidateInbound,
	ValidateOutbound: loomapi.ValidateOutbound,
}

func TestWireExamples(t *testing.T) { wiretest.Examples(t, "testdata/wire/examples.json", codec) }

func TestWireInvalidFrames(t *testing.T) {
	wiretest.InvalidFrames(t, "testdata/wire/invalid.json", codec)
}

func FuzzDecode(f *testing.F) { wiretest.Fuzz(f, "testdata/wire", "inbound", codec) }

func FuzzDecodeOutbound(f *testing.F) { wiretest.Fuzz(f, "testdata/wire", "outbound", codec) }

func TestWireDocumentExamples(t *testing.T) {
	wiretest.DocumentExamples(t, "../../../asyncapi/loom.yaml", codec)
}
