package agent_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/agent"
	"github.com/agentwire/agentwire/internal/budget"
	"github.com/agentwire/agentwire/internal/event"
)

// A run whose principal's budget is used up by its first model call is
// refused the second: the call is never made, and the run ends with
// budget.exceeded and run.failed code budget_exceeded, naming the budget.
// Each call's usage is priced from the budgets file.
func TestBudgetRefusesTheNextModelCall(t *testing.T) {
	e := newEnv(t, "tools")
	_, err := e.store.OwnThread(t.Context(), e.thread, "alice")
	require.NoError(t, err)
	bs, err := budget.Parse([]byte(`
principals:
  "*": {tokens_per_day: 100}
prices:
  "*": {input: 1, output: 2}
`))
	require.NoError(t, err)
	now := time.Now()
	checker := budget.NewChecker(budget.Config{Budgets: bs, Spending: e.store, Owners: e.store, Now: func() time.Time { return now }})

	evs := e.run(e.agent(agent.Config{Budget: checker}), "read the notes", false)

	assert.Len(t, e.model.requests(), 1, "the second model call is not made")
	usage := payloads[event.Usage](evs)
	require.Len(t, usage, 1)
	assert.InDelta(t, (100*1+20*2)/1e6, usage[0].Cost, 1e-12, "priced at $1 and $2 per million tokens")
	ex := payloads[event.BudgetExceeded](evs)
	require.Len(t, ex, 1)
	assert.Equal(t, event.BudgetExceeded{Principal: "alice", Limit: "tokens_per_day", Window: "day", Kind: "tokens",
		Allowed: 100, Spent: 120, Resets: budget.DayOf(now).End.Format(time.RFC3339), Message: ex[0].Message}, ex[0])
	failed := payloads[event.RunFailed](evs)
	require.Len(t, failed, 1)
	assert.Equal(t, event.CodeBudgetExceeded, failed[0].Code)
	assert.Equal(t, ex[0].Message, failed[0].Message)
	assert.Contains(t, failed[0].Message, "tokens_per_day")
	assert.Contains(t, failed[0].Message, budget.DayOf(now).End.Format(time.RFC3339))
	assert.Equal(t, event.TypeRunFailed, evs[len(evs)-1].Type(), "run.failed ends the run")

	// The next run is refused before its first call.
	evs = e.run(e.agent(agent.Config{Budget: checker}), "read the notes", false)
	assert.Len(t, e.model.requests(), 1, "no call is made")
	assert.Len(t, payloads[event.BudgetExceeded](evs), 1)
	assert.Empty(t, payloads[event.Usage](evs))
}

// Without a budget nothing is priced or refused.
func TestNoBudgetPricesNothing(t *testing.T) {
	e := newEnv(t, "tools")
	evs := e.run(e.agent(agent.Config{}), "read the notes", false)
	for _, u := range payloads[event.Usage](evs) {
		assert.Zero(t, u.Cost)
	}
	assert.Empty(t, payloads[event.BudgetExceeded](evs))
	assert.Equal(t, event.TypeRunCompleted, evs[len(evs)-1].Type())
}
