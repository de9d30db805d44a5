package budget_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/budget"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/metrics"
	"github.com/agentwire/agentwire/internal/store"
)

func date(y int, m time.Month, d, h, min, s, ns int, loc *time.Location) time.Time {
	return time.Date(y, m, d, h, min, s, ns, loc)
}

func TestWindows(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		ny = time.FixedZone("UTC-5", -5*3600)
	}
	utc := time.UTC
	for _, c := range []struct {
		at                 time.Time
		day, dayEnd, month time.Time
		monthEnd           time.Time
	}{
		{date(2026, 11, 27, 10, 0, 0, 0, utc), date(2026, 11, 27, 0, 0, 0, 0, utc), date(2026, 11, 28, 0, 0, 0, 0, utc),
			date(2026, 11, 1, 0, 0, 0, 0, utc), date(2026, 12, 1, 0, 0, 0, 0, utc)},
		// The first instant of a day is in it; the last nanosecond of the
		// previous one is not.
		{date(2026, 11, 28, 0, 0, 0, 0, utc), date(2026, 11, 28, 0, 0, 0, 0, utc), date(2026, 11, 29, 0, 0, 0, 0, utc),
			date(2026, 11, 1, 0, 0, 0, 0, utc), date(2026, 12, 1, 0, 0, 0, 0, utc)},
		{date(2026, 11, 27, 23, 59, 59, 999999999, utc), date(2026, 11, 27, 0, 0, 0, 0, utc), date(2026, 11, 28, 0, 0, 0, 0, utc),
			date(2026, 11, 1, 0, 0, 0, 0, utc), date(2026, 12, 1, 0, 0, 0, 0, utc)},
		// The year's last day and month.
		{date(2026, 12, 31, 23, 0, 0, 0, utc), date(2026, 12, 31, 0, 0, 0, 0, utc), date(2027, 1, 1, 0, 0, 0, 0, utc),
			date(2026, 12, 1, 0, 0, 0, 0, utc), date(2027, 1, 1, 0, 0, 0, 0, utc)},
		// February of a leap year, and of another.
		{date(2028, 2, 29, 12, 0, 0, 0, utc), date(2028, 2, 29, 0, 0, 0, 0, utc), date(2028, 3, 1, 0, 0, 0, 0, utc),
			date(2028, 2, 1, 0, 0, 0, 0, utc), date(2028, 3, 1, 0, 0, 0, 0, utc)},
		{date(2027, 2, 28, 12, 0, 0, 0, utc), date(2027, 2, 28, 0, 0, 0, 0, utc), date(2027, 3, 1, 0, 0, 0, 0, utc),
			date(2027, 2, 1, 0, 0, 0, 0, utc), date(2027, 3, 1, 0, 0, 0, 0, utc)},
		// Windows are UTC's whatever the clock's zone: 21:00 on 30 November
		// in New York is 1 December in UTC.
		{date(2026, 11, 30, 21, 0, 0, 0, ny), date(2026, 12, 1, 0, 0, 0, 0, utc), date(2026, 12, 2, 0, 0, 0, 0, utc),
			date(2026, 12, 1, 0, 0, 0, 0, utc), date(2027, 1, 1, 0, 0, 0, 0, utc)},
	} {
		d, m := budget.DayOf(c.at), budget.MonthOf(c.at)
		assert.Equal(t, budget.Window{Name: "day", Start: c.day, End: c.dayEnd}, d, "DayOf(%v)", c.at)
		assert.Equal(t, budget.Window{Name: "month", Start: c.month, End: c.monthEnd}, m, "MonthOf(%v)", c.at)
	}
}

func TestParseRefusesWhatItCannotEnforce(t *testing.T) {
	for _, c := range []struct{ name, text, want string }{
		{"empty", ``, "sets no budgets"},
		{"no principals", `prices: {"*": {input: 1, output: 1}}`, "sets no budgets"},
		{"unknown key", `principals: {"*": {tokens_per_week: 5}}`, "tokens_per_week"},
		{"misspelt section", `principal: {"*": {tokens_per_day: 5}}`, "principal"},
		{"negative", `principals: {alice: {tokens_per_day: -1}}`, `"alice": tokens_per_day is negative`},
		{"not a number", `principals: {alice: {tokens_per_day: lots}}`, "lots"},
		{"negative cost", `principals: {alice: {cost_per_month: -2}}
prices: {"*": {input: 1, output: 1}}`, "cost_per_month"},
		{"cost without prices", `principals: {"*": {cost_per_day: 5}}`, "prices"},
		{"negative price", `principals: {"*": {cost_per_day: 5}}
prices: {gpt-4o: {input: -1, output: 1}}`, `"gpt-4o"`},
		{"empty name", `principals: {"": {tokens_per_day: 5}}`, "empty"},
		{"not yaml", `principals: [`, "yaml"},
	} {
		_, err := budget.Parse([]byte(c.text))
		if assert.Error(t, err, c.name) {
			assert.Contains(t, err.Error(), c.want, c.name)
		}
	}
	// JSON is YAML too.
	_, err := budget.Parse([]byte(`{"principals": {"*": {"tokens_per_day": 1000}}}`))
	assert.NoError(t, err)
}

func TestLoad(t *testing.T) {
	_, err := budget.Load(filepath.Join(t.TempDir(), "missing.yaml"))
	assert.ErrorContains(t, err, "--budgets")
	path := filepath.Join(t.TempDir(), "budgets.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`principals: {"*": {tokens_per_day: -5}}`), 0o644))
	_, err = budget.Load(path)
	assert.ErrorContains(t, err, path)
}

func TestLimitsAndPrices(t *testing.T) {
	bs, err := budget.Parse([]byte(`
principals:
  "*": {tokens_per_day: 1000, cost_per_month: 5}
  alice: {tokens_per_month: 50000}
  root: {}
prices:
  gpt-4o: {input: 2.5, output: 10}
  gpt-4o-mini: {input: 0.15, output: 0.6}
  "*": {input: 1, output: 1}
`))
	require.NoError(t, err)
	l, ok := bs.Limits("bob")
	assert.True(t, ok)
	assert.Equal(t, int64(1000), *l.TokensPerDay, "bob has the default")
	l, ok = bs.Limits("alice")
	assert.True(t, ok)
	assert.Nil(t, l.TokensPerDay, "alice's entry replaces the default")
	_, ok = bs.Limits("root")
	assert.False(t, ok, "an empty entry limits nothing")

	assert.InDelta(t, 2.5+10, bs.Cost("gpt-4o", 1e6, 1e6), 1e-9)
	assert.InDelta(t, 0.15, bs.Cost("gpt-4o-mini-2024-07-18", 1e6, 0), 1e-9, "the longest prefix")
	assert.InDelta(t, 2.5, bs.Cost("gpt-4o:latest", 1e6, 0), 1e-9)
	assert.InDelta(t, 2, bs.Cost("llama3.1", 1e6, 1e6), 1e-9, "the default price")
	assert.InDelta(t, 0.000003, bs.Cost("gpt-4o", 1, 0), 1e-12, "rounded to a millionth")

	noDefault, err := budget.Parse([]byte(`principals: {alice: {tokens_per_day: 1}}`))
	require.NoError(t, err)
	_, ok = noDefault.Limits("bob")
	assert.False(t, ok, "without a default, principals not named are not limited")
	assert.Zero(t, noDefault.Cost("gpt-4o", 1e6, 1e6), "without prices nothing costs")
}

// fakeStore is the store's owners and spending as a Checker reads them.
type fakeStore struct {
	store.Owners
	owners map[string]string
	spent  map[string][]store.Spend // by principal: since the month's start, the day's
	asked  [][]time.Time
	err    error
}

func (f *fakeStore) ThreadOwner(_ context.Context, thread string) (string, bool, error) {
	o, ok := f.owners[thread]
	return o, ok, f.err
}

func (f *fakeStore) Spent(_ context.Context, principal string, since ...time.Time) ([]store.Spend, error) {
	f.asked = append(f.asked, since)
	if f.err != nil {
		return nil, f.err
	}
	if s, ok := f.spent[principal]; ok {
		return s, nil
	}
	return make([]store.Spend, len(since)), nil
}

func TestCheck(t *testing.T) {
	bs, err := budget.Parse([]byte(`
principals:
  "*": {tokens_per_day: 1000, tokens_per_month: 10000, cost_per_day: 1, cost_per_month: 5}
  anonymous: {tokens_per_day: 10}
  root: {}
prices: {"*": {input: 1, output: 1}}
`))
	require.NoError(t, err)
	now := date(2026, 11, 27, 23, 30, 0, 0, time.UTC)
	fs := &fakeStore{owners: map[string]string{"t-alice": "alice", "t-root": "root"}, spent: map[string][]store.Spend{}}
	mt := metrics.New()
	c := budget.NewChecker(budget.Config{Budgets: bs, Spending: fs, Owners: fs, Metrics: mt, Now: func() time.Time { return now }})
	check := func(thread string) *event.BudgetExceeded {
		t.Helper()
		ex, err := c.Check(t.Context(), thread)
		require.NoError(t, err)
		return ex
	}
	// Each change of the store's sums below is read once what the Checker
	// read before is no longer fresh (TestCheckReadsSpendingWhenStale).
	stale := func() { now = now.Add(6 * time.Second) }

	assert.Nil(t, check("t-alice"), "nothing spent")
	require.Len(t, fs.asked, 1)
	assert.Equal(t, []time.Time{date(2026, 11, 1, 0, 0, 0, 0, time.UTC), date(2026, 11, 27, 0, 0, 0, 0, time.UTC)}, fs.asked[0],
		"since the month's start and the day's")

	stale()
	fs.spent["alice"] = []store.Spend{{Tokens: 999, Cost: 0.5}, {Tokens: 999, Cost: 0.5}}
	assert.Nil(t, check("t-alice"), "below every budget")

	stale()
	fs.spent["alice"] = []store.Spend{{Tokens: 1000, Cost: 0.5}, {Tokens: 1000, Cost: 0.5}}
	ex := check("t-alice")
	require.NotNil(t, ex, "a budget reached is used up")
	assert.Equal(t, event.BudgetExceeded{Principal: "alice", Limit: "tokens_per_day", Window: "day", Kind: "tokens",
		Allowed: 1000, Spent: 1000, Resets: "2026-11-28T00:00:00Z", Message: ex.Message}, *ex)
	assert.Equal(t, `Budget exceeded: "alice" has used 1000 tokens of its 1000 tokens a day (tokens_per_day). No more model calls until it resets at 2026-11-28T00:00:00Z.`, ex.Message)

	stale()
	fs.spent["alice"] = []store.Spend{{Tokens: 20000, Cost: 5.25}, {Tokens: 0, Cost: 1.5}}
	ex = check("t-alice")
	require.NotNil(t, ex)
	assert.Equal(t, "tokens_per_month", ex.Limit, "the month's budget is named first: the day's end would not help")
	assert.Equal(t, "2026-12-01T00:00:00Z", ex.Resets)

	stale()
	fs.spent["alice"] = []store.Spend{{Tokens: 5000, Cost: 4}, {Tokens: 0, Cost: 1.5}}
	ex = check("t-alice")
	require.NotNil(t, ex)
	assert.Equal(t, "cost_per_day", ex.Limit)
	assert.Equal(t, "cost", ex.Kind)
	assert.Contains(t, ex.Message, "has used $1.5 of its $1 a day")

	// A thread nobody owns is anonymous's, held to anonymous's own entry.
	fs.spent["anonymous"] = []store.Spend{{Tokens: 10}, {Tokens: 10}}
	ex = check("t-unowned")
	require.NotNil(t, ex)
	assert.Equal(t, "anonymous", ex.Principal)
	assert.Equal(t, "tokens_per_day", ex.Limit)

	// A principal whose entry limits nothing is not even looked up.
	asked := len(fs.asked)
	fs.spent["root"] = []store.Spend{{Tokens: 1e9}, {Tokens: 1e9}}
	assert.Nil(t, check("t-root"))
	assert.Len(t, fs.asked, asked)

	// The clock moves to the next day: the day's budget is whole again
	// (the store sums from the new day's start).
	now = date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	fs.spent["alice"] = []store.Spend{{Tokens: 1000}, {}}
	assert.Nil(t, check("t-alice"))
	assert.Equal(t, date(2026, 11, 28, 0, 0, 0, 0, time.UTC), fs.asked[len(fs.asked)-1][1])

	stale()
	fs.err = errors.New("database gone")
	_, err = c.Check(t.Context(), "t-alice") // its owner is known by now
	assert.ErrorContains(t, err, "database gone")

	refusals := func(window, kind string) float64 {
		v, _ := mt.Sample("agentwire_budget_refusals_total", map[string]string{"window": window, "kind": kind})
		return v
	}
	assert.Equal(t, 2.0, refusals("day", "tokens"))
	assert.Equal(t, 1.0, refusals("month", "tokens"))
	assert.Equal(t, 1.0, refusals("day", "cost"))
	checks := func(result string) float64 {
		v, _ := mt.Sample("agentwire_budget_checks_total", map[string]string{"result": result})
		return v
	}
	assert.Equal(t, 4.0, checks("refused"))
	assert.Equal(t, 4.0, checks("allowed"))
	assert.Equal(t, 1.0, checks("error"))
}

// TestCheckReadsSpendingWhenStale: what a principal spent is read from the
// store at most once in a while (a sum over the month's usage events),
// and the calls charged meanwhile count at once.
func TestCheckReadsSpendingWhenStale(t *testing.T) {
	bs, err := budget.Parse([]byte(`principals: {"*": {tokens_per_day: 1000}}`))
	require.NoError(t, err)
	now := date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	fs := &fakeStore{owners: map[string]string{"t1": "alice", "t2": "alice"}, spent: map[string][]store.Spend{}}
	c := budget.NewChecker(budget.Config{Budgets: bs, Spending: fs, Owners: fs, Now: func() time.Time { return now }})
	check := func(thread string) *event.BudgetExceeded {
		t.Helper()
		ex, err := c.Check(t.Context(), thread)
		require.NoError(t, err)
		return ex
	}

	assert.Nil(t, check("t1"))
	assert.Nil(t, check("t2"), "another thread of the same principal")
	assert.Len(t, fs.asked, 1, "the spending is read once")

	c.Charge("t1", 600, 0)
	assert.Nil(t, check("t2"))
	c.Charge("t2", 400, 0)
	ex := check("t1")
	require.NotNil(t, ex, "the calls charged count at once")
	assert.Equal(t, 1000.0, ex.Spent)
	assert.Len(t, fs.asked, 1)

	now = now.Add(6 * time.Second)
	assert.Nil(t, check("t1"), "read again: the store's sum (nothing, here) replaces what was charged")
	assert.Len(t, fs.asked, 2)
}
