package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/agentwire/agentwire/generated/ag2api"
	"github.com/agentwire/agentwire/generated/agentchatapi"
	"github.com/agentwire/agentwire/generated/agentloopapi"
	"github.com/agentwire/agentwire/generated/loomapi"
)

// validators are each WebSocket protocol's generated checks of the frames
// a client sends (inbound) and the server sends (outbound).
var validators = map[string][2]func([]byte) error{
	"agentchat": {agentchatapi.ValidateInbound, agentchatapi.ValidateOutbound},
	"ag2":       {ag2api.ValidateInbound, ag2api.ValidateOutbound},
	"agentloop": {agentloopapi.ValidateInbound, agentloopapi.ValidateOutbound},
	"loom":      {loomapi.ValidateInbound, loomapi.ValidateOutbound},
}

// ErrInvalid is returned by Validate when a frame is invalid.
var ErrInvalid = errors.New("invalid frames")

// Validate runs `agentwire validate --protocol P [--direction D] FILE|-`:
// it checks each frame of the input (one JSON value a line, or one JSON
// document) against the protocol's schemas and says, per frame, valid (and
// which direction) or why not.
func Validate(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	protos := slices.Sorted(func(yield func(string) bool) {
		for k := range validators {
			if !yield(k) {
				return
			}
		}
	})
	proto := fs.String("protocol", "", "the protocol: "+strings.Join(protos, ", "))
	dir := fs.String("direction", "any", "inbound (client frames), outbound (server frames) or any")
	if err := fs.Parse(args); err != nil {
		return err
	}
	v, ok := validators[*proto]
	if !ok {
		return fmt.Errorf("validate: --protocol %q: want one of %s", *proto, strings.Join(protos, ", "))
	}
	var checks []struct {
		name string
		fn   func([]byte) error
	}
	switch *dir {
	case "inbound", "any":
		checks = append(checks, struct {
			name string
			fn   func([]byte) error
		}{"inbound", v[0]})
	}
	switch *dir {
	case "outbound", "any":
		checks = append(checks, struct {
			name string
			fn   func([]byte) error
		}{"outbound", v[1]})
	}
	if len(checks) == 0 {
		return fmt.Errorf("validate: --direction %q: want inbound, outbound or any", *dir)
	}
	in := stdin
	name := "-"
	if fs.NArg() == 1 && fs.Arg(0) != "-" {
		f, err := os.Open(fs.Arg(0))
		if err != nil {
			return err
		}
		defer f.Close()
		in, name = f, fs.Arg(0)
	} else if fs.NArg() > 1 {
		return errors.New("validate: want one FILE or -")
	}
	frames, err := readFrames(in)
	if err != nil {
		return fmt.Errorf("validate: %s: %w", name, err)
	}
	bad := 0
	for i, f := range frames {
		var why []string
		passed := ""
		for _, c := range checks {
			if err := c.fn(f); err != nil {
				why = append(why, c.name+": "+err.Error())
				continue
			}
			passed = c.name
			break
		}
		if passed != "" {
			fmt.Fprintf(stdout, "%s:%d: valid %s %s frame\n", name, i+1, *proto, passed)
			continue
		}
		bad++
		fmt.Fprintf(stdout, "%s:%d: invalid: %s\n", name, i+1, strings.Join(why, "; "))
	}
	if bad > 0 {
		return fmt.Errorf("%w: %d of %d", ErrInvalid, bad, len(frames))
	}
	return nil
}

// readFrames reads JSON values one after another (a JSONL file, or one
// pretty-printed document).
func readFrames(r io.Reader) ([][]byte, error) {
	dec := json.NewDecoder(bufio.NewReader(r))
	var out [][]byte
	for {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("frame %d: %w", len(out)+1, err)
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err != nil {
			return nil, err
		}
		out = append(out, buf.Bytes())
	}
	if len(out) == 0 {
		return nil, errors.New("no frames")
	}
	return out, nil
}
