package event

import (
	"encoding/json"
	"reflect"
	"sort"
	"testing"
	"time"
)

// samples has one payload of every type, with every field set.
func samples() []Payload {
	raw := json.RawMessage(`{"a":1}`)
	return []Payload{
		RunStarted{Strategy: "react", Agent: "assistant", Input: "hi"},
		RunCompleted{Reason: "final_answer", Reply: "done"},
		RunFailed{Code: CodeModelError, Message: "boom"},
		RunCancelled{Reason: CodeDenied},
		MessageUser{MessageID: "m1", Text: "hello"},
		MessageStarted{MessageID: "m2", Role: RoleAssistant, Agent: "a", Purpose: PurposeExplanation},
		MessageDelta{MessageID: "m2", Text: "he"},
		MessageCompleted{MessageID: "m2", Role: RoleSystem, Agent: "a", Text: "hello", Purpose: PurposeExplanation, Incomplete: true},
		ReasoningDelta{ReasoningID: "r", Text: "hm"},
		ReasoningCompleted{ReasoningID: "r", Text: "hmm", DurationMS: 12, Signature: "sig"},
		ToolCallStarted{CallID: "c", Name: "ls"},
		ToolCallDelta{CallID: "c", ArgumentsDelta: `{"pa`},
		ToolCallCompleted{CallID: "c", Name: "ls", Arguments: raw},
		ToolApprovalRequested{CallID: "c", Name: "bash", Arguments: raw, Command: []string{"rm", "x"}, Patch: "p", Reason: "r", Key: "rm"},
		ToolApprovalResolved{CallID: "c", Decision: DecisionApproveAlways, Message: "ok", Patch: "*** Begin Patch\n*** End Patch"},
		ToolExecStarted{CallID: "c", Name: "ls"},
		ToolExecOutput{CallID: "c", Name: "ls", Stream: "stdout", Text: "a\n"},
		ToolExecProgress{CallID: "c", Name: "ls", Percent: 50, Message: "half"},
		ToolExecCompleted{CallID: "c", Name: "ls", Result: "a", IsError: true, ExitCode: new(2), DurationMS: 12},
		InputRequested{RequestID: "i", Prompt: "key?", Secret: true, TimeoutSeconds: 30, Agent: "a"},
		InputProvided{RequestID: "i", Text: "k"},
		InputTimedOut{RequestID: "i", TimeoutSeconds: 30},
		UIRequested{RequestID: "u", Tool: "ui", Component: "Form", Payload: raw, Agent: "a"},
		UIResolved{RequestID: "u", Data: raw},
		UIPatched{RequestID: "u", Patch: json.RawMessage(`[{"op":"add","path":"/a","value":1}]`), Payload: raw},
		AgentSelected{Agent: "critic"},
		NodeEntered{Node: "think"},
		NodeExited{Node: "think", Error: "e"},
		TotExpanded{Candidates: []string{"a", "b"}, Depth: 2},
		TotEvaluated{Chosen: 1, Scores: []float64{0.5, 0.9}},
		TotBacktracked{Reason: "dead end", ToDepth: 1, Candidate: 2},
		GotPlanned{NodeIDs: []string{"n1", "n2"}, EdgeCount: 1, Tasks: []string{"t1", "t2"}, Edges: [][2]string{{"n1", "n2"}}},
		GotNodeStarted{NodeID: "n1"},
		GotNodeCompleted{NodeID: "n1", Summary: "s"},
		GotNodeFailed{NodeID: "n2", Error: "e", Skipped: true},
		GotExpanded{NodeID: "n1", NodesAdded: 2, EdgesAdded: 1, NodeIDs: []string{"n1.a", "n1.b"}, Tasks: []string{"a", "b"}},
		Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15, Cost: 0.01, Model: "gpt-4o", Purpose: PurposeSummary},
		ContextCompacted{OldTokens: 100, NewTokens: 10, Strategy: "threshold", Summary: "s", KeptMessages: 3},
		BudgetExceeded{Principal: "alice", Limit: "tokens_per_day", Window: "day", Kind: "tokens", Allowed: 1000, Spent: 1200,
			Resets: "2026-11-28T00:00:00Z", Message: "over budget"},
	}
}

func TestEveryTypeHasASampleAndADecoder(t *testing.T) {
	var got []string
	for _, p := range samples() {
		got = append(got, string(p.EventType()))
	}
	var want []string
	for _, ty := range Types {
		want = append(want, string(ty))
		if _, ok := registry[ty]; !ok {
			t.Errorf("type %s has no decoder", ty)
		}
	}
	sort.Strings(got)
	sort.Strings(want)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("samples cover %v, want %v", got, want)
	}
}

func TestPayloadRoundTrip(t *testing.T) {
	for _, p := range samples() {
		b, err := EncodePayload(p)
		if err != nil {
			t.Fatalf("EncodePayload(%T) = %v", p, err)
		}
		back, err := DecodePayload(p.EventType(), b)
		if err != nil {
			t.Fatalf("DecodePayload(%s, %s) = %v", p.EventType(), b, err)
		}
		if !reflect.DeepEqual(back, p) {
			t.Errorf("DecodePayload(%s) = %#v, want %#v", b, back, p)
		}
	}
}

func TestEventJSONRoundTrip(t *testing.T) {
	for _, p := range samples() {
		e := New("thread-1", "run-1", p)
		e.Seq = 7
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatalf("Marshal(%T) = %v", p, err)
		}
		var back Event
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("Unmarshal(%s) = %v", b, err)
		}
		if !back.Time.Equal(e.Time) {
			t.Errorf("time %v, want %v", back.Time, e.Time)
		}
		back.Time = e.Time
		if !reflect.DeepEqual(back, e) {
			t.Errorf("Unmarshal(%s) = %#v, want %#v", b, back, e)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	if _, err := DecodePayload("no.such.type", []byte(`{}`)); err == nil {
		t.Error("DecodePayload of an unknown type succeeded")
	}
	if _, err := DecodePayload(TypeUsage, []byte(`{"prompt_tokens":"x"}`)); err == nil {
		t.Error("DecodePayload of a mistyped field succeeded")
	}
	if _, err := EncodePayload(nil); err == nil {
		t.Error("EncodePayload(nil) succeeded")
	}
}

func TestIDsAreUniqueAndOrdered(t *testing.T) {
	prev := NewID()
	for i := 0; i < 1000; i++ {
		id := NewID()
		if id <= prev {
			t.Fatalf("NewID() = %s after %s: not increasing", id, prev)
		}
		prev = id
	}
	if e := New("t", "r", NodeEntered{Node: "x"}); e.Time.Location() != time.UTC || e.Type() != TypeNodeEntered {
		t.Errorf("New = %+v", e)
	}
}

// FuzzEncodeMessageDelta: a delta's storage encoding is the bytes
// json.Marshal writes for it, whatever its text.
func FuzzEncodeMessageDelta(f *testing.F) {
	f.Add("01J0MSG", "Hello, <world> & \"you\"\n", int64(0))
	f.Add("", "\x00\x1f\x7f\u2028\u2029\xff\xfe tab\t", int64(-3))
	f.Add("m", "日本語 🙂", int64(1<<40))
	f.Fuzz(func(t *testing.T, id, text string, offset int64) {
		d := MessageDelta{MessageID: id, Text: text, Offset: offset}
		want, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		got, err := EncodePayload(d)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Fatalf("EncodePayload(%#v) = %s, json.Marshal = %s", d, got, want)
		}
	})
}
