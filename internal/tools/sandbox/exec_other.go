//go:build !linux

package sandbox

import (
	"context"
	"errors"
)

// Main returns at once: the launcher is Linux's.
func Main() {}

func (s *Sandbox) probe(string) string {
	return "an OS sandbox (agentwire builds one from Linux's namespaces, Landlock and seccomp only)"
}

func (s *Sandbox) command(context.Context, Level, Request) (*Cmd, error) {
	return nil, errors.New("sandbox: not available on this system")
}
