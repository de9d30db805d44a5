package server

import (
	"context"
	"time"
)

// checkTimeout bounds the start-up check of the model: an endpoint that
// never answers delays the start by no more than this.
const checkTimeout = 15 * time.Second

// CheckModel makes the cheapest call that shows the configured model can
// be used (llm.Model.Check), bounded by checkTimeout. Its error says the
// provider, the URL or model tried and what to change (llm.CallError).
func (s *Server) CheckModel(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	return s.model.Check(ctx)
}
