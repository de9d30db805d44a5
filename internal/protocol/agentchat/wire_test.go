package agentchat

import (
	"context"
	"errors"
	"testing"

	"github.com/agentwire/agentwire/generated/agentchatapi"
	"github.com/agentwire/agentwire/internal/protocol/wiretest"
	"github.com/agentwire/agentwire/internal/wire"
)

var codec = wiretest.Codec{
	Decode:           func(b []byte) (any, error) { return agentchatapi.Decode(b) },
	DecodeOutbound:   func(b []byte) (any, error) { return agentchatapi.DecodeOutbound(b) },
	Encode:           func(m any) ([]byte, error) { return agentchatapi.Encode(m.(agentchatapi.Message)) },
	ValidateInbound:  agentchatapi.ValidateInbound,
	ValidateOutbound: agentchatapi.ValidateOutbound,
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

// A decode error names the kind of violation and, once the frame's type is
// known, the message type; validating gives the same error.
func TestWireErrorFields(t *testing.T) {
	for _, tc := range []struct {
		frame string
		want  wire.Error
	}{
		{`{"type":"chat","message":1}`, wire.Error{Kind: wire.KindType, Message: "chat", Path: "/message", Reason: "must be string"}},
		{`{"type":"chat"}`, wire.Error{Kind: wire.KindRequired, Message: "chat", Path: "/message", Reason: "is required"}},
		{`{"type":"shout"}`, wire.Error{Kind: wire.KindUnknownType, Message: "shout", Path: "/type", Reason: `unknown message type "shout"`}},
		{`{"type":7}`, wire.Error{Kind: wire.KindType, Path: "/type", Reason: "must be string"}},
		{`{"type":"chat",`, wire.Error{Kind: wire.KindSyntax, Reason: "invalid JSON: unexpected end of input"}},
		// A server message is not a client message.
		{`{"type":"error","error":"x"}`, wire.Error{Kind: wire.KindUnknownType, Message: "error", Path: "/type", Reason: `unknown message type "error"`}},
	} {
		_, err := agentchatapi.Decode([]byte(tc.frame))
		we, ok := wire.AsError(err)
		if !ok || *we != tc.want {
			t.Errorf("Decode(%s) = %#v, want %#v", tc.frame, err, &tc.want)
		}
		verr := agentchatapi.ValidateInbound([]byte(tc.frame))
		if ve, ok := wire.AsError(verr); !ok || *ve != tc.want {
			t.Errorf("ValidateInbound(%s) = %#v, want %#v", tc.frame, verr, &tc.want)
		}
	}
	err := agentchatapi.ValidateOutbound([]byte(`{"type":"agent_message","message":null}`))
	if we, ok := wire.AsError(err); !ok || *we != (wire.Error{Kind: wire.KindType, Message: "agent_message", Path: "/message", Reason: "must be string"}) {
		t.Errorf("ValidateOutbound = %#v", err)
	}
}

// A Handler that embeds UnimplementedHandler answers the messages it does
// not handle with wire.ErrUnimplemented.
func TestUnimplementedHandler(t *testing.T) {
	var h struct {
		agentchatapi.UnimplementedHandler
	}
	err := agentchatapi.Dispatch(context.Background(), h, agentchatapi.ChatRequest{Type: agentchatapi.TypeChat, Message: "hi"})
	if !errors.Is(err, wire.ErrUnimplemented) {
		t.Fatalf("Dispatch = %v, want wire.ErrUnimplemented", err)
	}
	var ue *wire.UnimplementedError
	if !errors.As(err, &ue) || ue.Message != agentchatapi.TypeChat {
		t.Fatalf("Dispatch = %#v, want an UnimplementedError for %q", err, agentchatapi.TypeChat)
	}
}
