package ag2

import (
	"testing"

	"github.com/agentwire/agentwire/generated/ag2api"
	"github.com/agentwire/agentwire/internal/protocol/wiretest"
)

var codec = wiretest.Codec{
	Decode:           func(b []byte) (any, error) { return ag2api.Decode(b) },
	DecodeOutbound:   func(b []byte) (any, error) { return ag2api.DecodeOutbound(b) },
	Encode:           func(m any) ([]byte, error) { return ag2api.Encode(m.(ag2api.Message)) },
	ValidateInbound:  ag2api.ValidateInbound,
	ValidateOutbound: ag2api.ValidateOutbound,
}

func TestWireExamples(t *testing.T) { wiretest.Examples(t, "testdata/wire/examples.json", codec) }

func TestWireInvalidFrames(t *testing.T) {
	wiretest.InvalidFrames(t, "testdata/wire/invalid.json", codec)
}

func FuzzDecode(f *testing.F) { wiretest.Fuzz(f, "testdata/wire", "inbound", codec) }

func FuzzDecodeOutbound(f *testing.F) { wiretest.Fuzz(f, "testdata/wire", "outbound", codec) }

func TestWireDocumentExamples(t *testing.T) {
	wiretest.DocumentExamples(t, "../../../asyncapi/ag2.yaml", codec)
}
