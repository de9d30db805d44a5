package bus

import (
	"errors"
	"sync"
)

// A bus between processes carries a command handler's error as text. So
// that the sender can still tell what went wrong (errors.Is), the errors
// senders act on are registered by name: a handler's error that matches a
// registered one crosses with its name, and arrives as an error that
// matches the same registered error and reads as the original text.

var (
	knownMu sync.RWMutex
	known   = map[string]error{}
	order   []string
)

func init() {
	RegisterError("bus.closed", ErrClosed)
	RegisterError("bus.no_handler", ErrNoHandler)
	RegisterError("bus.handler_exists", ErrHandlerExists)
}

// RegisterError names err for transports that cross processes. Call it
// from an init function; a name registered twice panics.
func RegisterError(name string, err error) {
	knownMu.Lock()
	defer knownMu.Unlock()
	if _, dup := known[name]; dup {
		panic("bus: error " + name + " registered twice")
	}
	known[name] = err
	order = append(order, name)
}

// ErrorName returns the name of the first registered error that err
// matches (errors.Is).
func ErrorName(err error) (string, bool) {
	knownMu.RLock()
	defer knownMu.RUnlock()
	for _, name := range order {
		if errors.Is(err, known[name]) {
			return name, true
		}
	}
	return "", false
}

// RemoteError is a handler's error as it arrives over a transport: its
// text, and the registered error it matched, if any.
type RemoteError struct {
	Text string
	Name string // "" when it matched no registered error
}

func (e *RemoteError) Error() string { return e.Text }

// Is reports whether target is the registered error e matched.
func (e *RemoteError) Is(target error) bool {
	if e.Name == "" {
		return false
	}
	knownMu.RLock()
	defer knownMu.RUnlock()
	return known[e.Name] == target
}
