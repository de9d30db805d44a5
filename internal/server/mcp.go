package server

import (
	"context"
	"log/slog"

	"github.com/agentwire/agentwire/internal/tools"
	"github.com/agentwire/agentwire/internal/tools/mcp"
)

// startMCP connects to the MCP servers of the --mcp file (none when file
// is "") and adds their tools to reg.
func (s *Server) startMCP(ctx context.Context, file string, reg *tools.Registry, log *slog.Logger) error {
	if file == "" {
		return nil
	}
	c, err := mcp.Load(file)
	if err != nil {
		return err
	}
	if s.mcp, err = mcp.Start(ctx, c, s.box, s.root.Dir(), log); err != nil {
		return err
	}
	for _, t := range s.mcp.Tools() {
		if err := reg.Register(t); err != nil {
			return err
		}
	}
	return nil
}
