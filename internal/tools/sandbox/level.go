package sandbox

import (
	"fmt"
	"strings"
)

// Level is how far the OS sandbox lets a command go. The names are Codex's.
// The zero Level is ReadOnly, so a command whose level nobody chose runs at
// the most confined one.
type Level int

// Levels, from most to least confined.
const (
	// ReadOnly reads the working folder and the system directories,
	// writes nothing but a private /tmp, and reaches no network: what a
	// command that runs without asking gets.
	ReadOnly Level = iota
	// WorkspaceWrite also writes the working folder (except its
	// .git/config and .git/hooks), and reaches the network only when the
	// server grants it (--sandbox-network on): what an approved command,
	// or any command under full-auto, gets.
	WorkspaceWrite
	// FullAccess is no sandbox at all: the command can do whatever the
	// server's user can. Only --sandbox off gives it.
	FullAccess
)

func (l Level) String() string {
	switch l {
	case ReadOnly:
		return "read-only"
	case WorkspaceWrite:
		return "workspace-write"
	case FullAccess:
		return "danger-full-access"
	}
	return fmt.Sprintf("Level(%d)", int(l))
}

// Kind is what confines the commands the tools start.
type Kind int

// Kinds. The zero Kind is KindNone, the one under which nothing runs
// without a person's approval.
const (
	// KindNone: no OS sandbox can be built here (the kernel lacks
	// Landlock or user namespaces). Approved commands run as the
	// server's user; nothing runs without approval.
	KindNone Kind = iota
	// KindOS: namespaces, Landlock and seccomp confine every command at
	// the level its approval gave it.
	KindOS
	// KindOff: --sandbox off, danger-full-access by choice: commands run
	// as the server's user, as the approval policy lets them.
	KindOff
)

func (k Kind) String() string {
	switch k {
	case KindNone:
		return "none"
	case KindOS:
		return "os"
	case KindOff:
		return "off"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Mode is how the server was asked to sandbox commands (--sandbox).
type Mode string

// Modes.
const (
	// ModeAuto (the default) uses the OS sandbox when the kernel allows
	// it, and otherwise starts with every command asking for approval.
	ModeAuto Mode = "auto"
	// ModeRequire refuses to start without the OS sandbox.
	ModeRequire Mode = "require"
	// ModeOff runs commands unconfined (danger-full-access).
	ModeOff Mode = "off"
)

// ParseMode reads a --sandbox value; "" is ModeAuto.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(strings.ToLower(strings.TrimSpace(s))); m {
	case "":
		return ModeAuto, nil
	case ModeAuto, ModeRequire, ModeOff:
		return m, nil
	}
	return "", fmt.Errorf("unknown sandbox mode %q (want auto, require or off)", s)
}
