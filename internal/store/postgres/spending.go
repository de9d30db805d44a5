package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentwire/agentwire/internal/store"
)

var _ store.Spending = (*Store)(nil)

// Spent implements store.Spending: one scan of the principal's usage
// events from the earliest since (index events_usage), summed for each
// since.
func (s *Store) Spent(ctx context.Context, principal string, since ...time.Time) ([]store.Spend, error) {
	out := make([]store.Spend, len(since))
	if len(since) == 0 {
		return out, nil
	}
	if err := s.usable(ctx); err != nil {
		return nil, err
	}
	args := []any{principal, slices.MinFunc(since, time.Time.Compare)}
	var cols []string
	for i, t := range since {
		args = append(args, t)
		n := i + 3
		cols = append(cols,
			fmt.Sprintf(`coalesce(sum((e.data->>'total_tokens')::int8) FILTER (WHERE e.time >= $%d), 0)::int8`, n),
			fmt.Sprintf(`coalesce(sum((e.data->>'cost')::float8) FILTER (WHERE e.time >= $%d), 0)::float8`, n))
	}
	q := `SELECT ` + strings.Join(cols, ", ") + `
		FROM thread_owners o JOIN events e ON e.thread = o.thread AND e.type = 'usage' AND e.time >= $2
		WHERE o.principal = $1`
	dest := make([]any, 0, 2*len(since))
	for i := range out {
		dest = append(dest, &out[i].Tokens, &out[i].Cost)
	}
	if err := s.pool.QueryRow(ctx, q, args...).Scan(dest...); err != nil {
		return nil, fmt.Errorf("postgres: spending of %q: %w", principal, s.closedErr(err))
	}
	return out, nil
}
