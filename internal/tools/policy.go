package tools

import (
	"fmt"
	"strings"
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
//	           read  edit    read-only command  other command
//	suggest    run   ask     run                ask
//	auto-edit  run   run     run                ask
//	full-auto  run   run     run                run
//	read-only  run   refuse  refuse             refuse
//
// A call of unknown effect is judged as an other command. A Class with
// Parts is judged part by part: Refuse if any part is refused, else Ask if
// any part asks, else Run.
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
	case c.Effect == EffectEdit && p == PolicyAutoEdit:
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
