package server

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// AddrLines are the bound addresses as KEY=VALUE lines, for programs
// (--print-addr, --addr-file, `agentwire contract`): AGENTWIRE_ADDR (the
// main listener's host:port), AGENTWIRE_URL (its http:// URL), one
// AGENTWIRE_<PROTOCOL>_URL per protocol (its first endpoint on the main
// listener, path placeholders such as {threadId} as they are), and one
// AGENTWIRE_<PROTOCOL>_ADDR per --listen. The values hold no white space
// or quotes, so a shell can eval the lines or read them with `source`.
func (s *Server) AddrLines() string {
	var b strings.Builder
	main := s.Addr("main")
	fmt.Fprintf(&b, "AGENTWIRE_ADDR=%s\n", main)
	fmt.Fprintf(&b, "AGENTWIRE_URL=http://%s\n", main)
	for _, a := range s.adapters {
		if eps := a.Endpoints(); len(eps) > 0 {
			fmt.Fprintf(&b, "AGENTWIRE_%s_URL=%s://%s%s\n", strings.ToUpper(a.name), eps[0].Scheme, main, eps[0].Path)
		}
	}
	for _, proto := range slices.Sorted(maps.Keys(s.cfg.Listen)) {
		fmt.Fprintf(&b, "AGENTWIRE_%s_ADDR=%s\n", strings.ToUpper(proto), s.Addr(proto))
	}
	return b.String()
}

// WriteAddrFile writes AddrLines to path whole: into a temporary file
// beside it, then renamed over it, so that a program waiting for the file
// never reads half of it.
func (s *Server) WriteAddrFile(path string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("--addr-file: %w", err)
	}
	_, err = tmp.WriteString(s.AddrLines())
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("--addr-file: %w", err)
	}
	return nil
}
