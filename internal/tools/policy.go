package tools

import (
	"fmt"
	"strings"

	"github.com/agentwire/agentwire/internal/tools/sandbox"
)

// Policy is an approval policy: which calls run freely, which ask a person,
// which are refused. The names are Codex's; the zero Policy (and any name
// ParsePolicy would reject) judges as PolicySuggest.
type Policy string

// Policies.
const (
	// PolicySuggest (the default) runs reads and known read-only commands,
	// and asks before edits and every other command.
	PolicySuggest Policy = "suggest"
	// PolicyAutoEdit also runs edits inside the working folder; commands
	// that are not read-only still ask.
	PolicyAutoEdit Policy = "auto-edit"
	// PolicyFullAuto runs everything. File tools stay confined to the
	// working folder.
	PolicyFullAuto Policy = "full-auto"
	// PolicyReadOnly only reads: tools that could write are not offered to
	// the model (Registry.Filter), and a call that would write is refused.
	PolicyReadOnly Policy = "read-only"
)

// ParsePolicy reads a policy name; "" is PolicySuggest. Case and the
// separator ("auto_edit", "autoedit") do not matter.
func ParsePolicy(s string) (Policy, error) {
	norm := strings.NewReplacer("-", "", "_", "", " ", "").Replace(strings.ToLower(strings.TrimSpace(s)))
	switch norm {
	case "", "suggest":
		return PolicySuggest, nil
	case "autoedit":
		return PolicyAutoEdit, nil
	case "fullauto":
		return PolicyFullAuto, nil
	case "readonly":
		return PolicyReadOnly, nil
	}
	return "", fmt.Errorf("unknown approval policy %q (want suggest, auto-edit, full-auto or read-only)", s)
}

// Verdict is a policy's answer for one call.
type Verdict int

// Verdicts, from most to least permissive. The values match agent.Verdict's.
const (
	Run    Verdict = iota + 1 // run without asking
	Ask                       // ask a person first
	Refuse                    // never run: the policy forbids it
)

func (v Verdict) String() string {
	switch v {
	case Run:
		return "run"
	case Ask:
		return "ask"
	case Refuse:
		return "refuse"
	}
	return fmt.Sprintf("Verdict(%d)", int(v))
}

// Decide judges a classified call. remembered reports whether a person
// chose approve-always for an approval key earlier in the thread (the
// caller rebuilds that memory from the thread's log); it may be nil. A
// remembered key turns Ask into Run, never Refuse into Run.
//
//	           read  edit    network  read-only command  other command
//	suggest    run   ask     ask      run                ask
//	auto-edit  run   run     run      run                ask
//	full-auto  run   run     run      run                run
//	read-only  run   refuse  refuse   refuse             refuse
//
// A call of unknown effect is judged as an other command. A Class with
// Parts is judged part by part: Refuse if any part is refused, else Ask if
// any part asks, else Run.
//
// Decide judges as if an OS sandbox held every command (Judge says what
// changes when none does): a read-only command runs without asking because
// it runs in the read-only sandbox.
func (p Policy) Decide(c Class, remembered func(key string) bool) Verdict {
	if len(c.Parts) > 0 {
		v := Run
		for _, part := range c.Parts {
			v = max(v, p.Decide(part, remembered))
		}
		return v
	}
	switch p {
	case PolicyFullAuto:
		return Run
	case PolicyReadOnly:
		if c.Effect == EffectRead {
			return Run
		}
		return Refuse
	}
	switch {
	case c.Effect == EffectRead:
		return Run
	case (c.Effect == EffectEdit || c.Effect == EffectNetwork) && p == PolicyAutoEdit:
		return Run
	case c.Effect == EffectCommand && c.ReadOnlyCommand:
		return Run
	case c.Key != "" && remembered != nil && remembered(c.Key):
		return Run
	}
	return Ask
}

// NeedsApproval reports whether the call must wait for a person's decision.
// It is false for refused calls as well; use Decide to tell them apart.
func (p Policy) NeedsApproval(c Class, remembered func(key string) bool) bool {
	return p.Decide(c, remembered) == Ask
}

// Level is the sandbox level of a call about to run: approved says a
// person approved it. A command that runs only because the classifier
// knows it to read gets LevelReadOnly; one a person approved, now or for
// good (a remembered key), or that full-auto runs, gets
// LevelWorkspaceWrite. A Class with Parts gets the highest level any of
// its parts needs. Level judges as Decide does, with an OS sandbox.
func (p Policy) Level(c Class, approved bool, remembered func(key string) bool) Level {
	if approved || p == PolicyFullAuto {
		return LevelWorkspaceWrite
	}
	if len(c.Parts) > 0 {
		l := LevelReadOnly
		for _, part := range c.Parts {
			l = max(l, p.Level(part, false, remembered))
		}
		return l
	}
	if c.Effect == EffectCommand && !c.ReadOnlyCommand && c.Key != "" && remembered != nil && remembered(c.Key) {
		return LevelWorkspaceWrite
	}
	return LevelReadOnly
}

// Judge is an approval policy applied with what confines commands on this
// server: the agent asks it, not the bare Policy. With an OS sandbox
// (sandbox.KindOS) it judges as its Policy does. With none available
// (sandbox.KindNone, also the zero value) every command asks, whatever the
// policy and the approve-always memory say: nothing would hold a command
// the classifier misjudged. With the sandbox switched off on purpose
// (sandbox.KindOff, --sandbox off) it judges as its Policy does and every
// call runs with full access.
type Judge struct {
	Policy  Policy
	Sandbox sandbox.Kind
}

// Decide judges c as Policy.Decide does, under j.Sandbox.
func (j Judge) Decide(c Class, remembered func(key string) bool) Verdict {
	if len(c.Parts) > 0 {
		v := Run
		for _, part := range c.Parts {
			v = max(v, j.Decide(part, remembered))
		}
		return v
	}
	v := j.Policy.Decide(c, remembered)
	if v == Run && c.Effect == EffectCommand && j.Sandbox == sandbox.KindNone {
		return Ask
	}
	return v
}

// Level is the level of a call about to run, as Policy.Level says, under
// j.Sandbox: LevelFullAccess when the sandbox is off.
func (j Judge) Level(c Class, approved bool, remembered func(key string) bool) Level {
	if j.Sandbox == sandbox.KindOff {
		return LevelFullAccess
	}
	return j.Policy.Level(c, approved, remembered)
}
