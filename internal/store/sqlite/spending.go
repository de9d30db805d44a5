package sqlite

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
	args := []any{principal, slices.MinFunc(since, time.Time.Compare).UnixMicro()}
	var cols []string
	for i, t := range since {
		args = append(args, t.UnixMicro())
		n := i + 3
		cols = append(cols,
			fmt.Sprintf(`coalesce(sum(CASE WHEN e.time >= ?%d THEN json_extract(e.data, '$.total_tokens') END), 0)`, n),
			fmt.Sprintf(`coalesce(sum(CASE WHEN e.time >= ?%d THEN json_extract(e.data, '$.cost') END), 0.0)`, n))
	}
	q := `SELECT ` + strings.Join(cols, ", ") + `
		FROM thread_owners o JOIN events e ON e.thread = o.thread AND e.type = 'usage' AND e.time >= ?2
		WHERE o.principal = ?1`
	dest := make([]any, 0, 2*len(since))
	for i := range out {
		dest = append(dest, &out[i].Tokens, &out[i].Cost)
	}
	if err := s.rdb.QueryRowContext(ctx, q, args...).Scan(dest...); err != nil {
		return nil, fmt.Errorf("sqlite: spending of %q: %w", principal, s.closedErr(err))
	}
	return out, nil
}
