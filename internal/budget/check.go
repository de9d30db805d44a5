package budget

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/identity"
	"github.com/agentwire/agentwire/internal/metrics"
	"github.com/agentwire/agentwire/internal/store"
)

// Kinds of budget.
const (
	Tokens = "tokens"
	Cost   = "cost"
)

// Checker holds runs to their principals' budgets (agent.Budget).
type Checker struct {
	budgets  *Budgets
	spending store.Spending
	owners   store.Owners
	metrics  *metrics.Metrics
	now      func() time.Time

	// owner remembers threads' owners already read: a thread's owner
	// never changes. spent remembers what principals spent, as read from
	// the store and added to by Charge (see spentFresh).
	mu    sync.Mutex
	owner map[string]string
	spent map[string]*spentEntry
}

// spentEntry is what a principal spent in a month and a day.
type spentEntry struct {
	month, day time.Time // the windows' starts it is for
	read       time.Time // when it was read from the store
	spent      [2]store.Spend
}

// spentFresh is how long what a principal spent, read from the store, is
// used before it is read again: reading it sums the principal's usage
// events of the month, which grows with its calls, so a check does not
// read it on every model call. The calls made through this Checker are
// added to it as they are made (Charge), so on one node a check counts
// every call that ended; other nodes' calls count within spentFresh.
const spentFresh = 5 * time.Second

// maxKnownOwners bounds the owner cache; past it the cache starts over.
const maxKnownOwners = 100_000

// Config is what a Checker works with.
type Config struct {
	Budgets *Budgets
	// Spending sums what principals spent; Owners says whose each thread
	// is (both the store).
	Spending store.Spending
	Owners   store.Owners
	// Metrics counts checks and refusals; nil counts nothing.
	Metrics *metrics.Metrics
	// Now is the clock the windows are taken from (default time.Now).
	Now func() time.Time
}

// NewChecker returns a Checker.
func NewChecker(cfg Config) *Checker {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Checker{budgets: cfg.Budgets, spending: cfg.Spending, owners: cfg.Owners, metrics: cfg.Metrics,
		now: cfg.Now, owner: map[string]string{}, spent: map[string]*spentEntry{}}
}

// limit is one budget of a principal's, in the order Check looks at them:
// the month's first, since a day's ending does not help when the month's
// budget is used up too.
type limit struct {
	name, kind string
	month      bool
	allowed    float64
}

func (l Limits) list() []limit {
	var out []limit
	if v := l.TokensPerMonth; v != nil {
		out = append(out, limit{"tokens_per_month", Tokens, true, float64(*v)})
	}
	if v := l.CostPerMonth; v != nil {
		out = append(out, limit{"cost_per_month", Cost, true, *v})
	}
	if v := l.TokensPerDay; v != nil {
		out = append(out, limit{"tokens_per_day", Tokens, false, float64(*v)})
	}
	if v := l.CostPerDay; v != nil {
		out = append(out, limit{"cost_per_day", Cost, false, *v})
	}
	return out
}

// Check returns the budget.exceeded that refuses the next model call of a
// run of thread, or nil when its principal has budget left: a budget is
// used up once what the principal's threads spent in its window reaches
// it. A call already made is not undone, so a budget is overrun by at
// most the calls that were going on when it was reached. err is an error
// reading the owner or the spending.
func (c *Checker) Check(ctx context.Context, thread string) (*event.BudgetExceeded, error) {
	principal, err := c.principal(ctx, thread)
	if err != nil {
		c.metrics.BudgetChecked(metrics.BudgetError)
		return nil, err
	}
	limits, ok := c.budgets.Limits(principal)
	if !ok {
		c.metrics.BudgetChecked(metrics.BudgetAllowed)
		return nil, nil
	}
	now := c.now()
	day, month := DayOf(now), MonthOf(now)
	spent, err := c.spentBy(ctx, principal, month.Start, day.Start, now)
	if err != nil {
		c.metrics.BudgetChecked(metrics.BudgetError)
		return nil, fmt.Errorf("read what %q spent: %w", principal, err)
	}
	for _, l := range limits.list() {
		w, s := day, spent[1]
		if l.month {
			w, s = month, spent[0]
		}
		used := float64(s.Tokens)
		if l.kind == Cost {
			used = s.Cost
		}
		if used < l.allowed {
			continue
		}
		c.metrics.BudgetChecked(metrics.BudgetRefused)
		c.metrics.BudgetRefusal(w.Name, l.kind)
		ex := &event.BudgetExceeded{Principal: principal, Limit: l.name, Window: w.Name, Kind: l.kind,
			Allowed: l.allowed, Spent: used, Resets: w.End.Format(time.RFC3339)}
		ex.Message = Message(*ex)
		return ex, nil
	}
	c.metrics.BudgetChecked(metrics.BudgetAllowed)
	return nil, nil
}

// Message is the sentence that tells a person about e: whose budget, how
// much of it was spent, and when it is whole again.
func Message(e event.BudgetExceeded) string {
	amount := func(v float64) string {
		if e.Kind == Cost {
			return "$" + strconv.FormatFloat(v, 'f', -1, 64)
		}
		return strconv.FormatFloat(v, 'f', -1, 64) + " tokens"
	}
	return fmt.Sprintf("Budget exceeded: %q has used %s of its %s a %s (%s). No more model calls until it resets at %s.",
		e.Principal, amount(e.Spent), amount(e.Allowed), e.Window, e.Limit, e.Resets)
}

// Cost is the cost in USD of a model call's tokens (Budgets.Cost).
func (c *Checker) Cost(model string, prompt, completion int64) float64 {
	return c.budgets.Cost(model, prompt, completion)
}

// Charge adds a call a run of thread made, which used tokens and cost, to
// what its principal is known to have spent, until the spending is read
// again. A thread whose owner is not known here yet needs nothing: its
// principal's spending is read from the store at its next check.
func (c *Checker) Charge(thread string, tokens int64, cost float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.owner[thread]
	if !ok {
		return
	}
	if e := c.spent[p]; e != nil {
		for i := range e.spent {
			e.spent[i].Tokens += tokens
			e.spent[i].Cost += cost
		}
	}
}

// spentBy returns what principal spent since month and since day: as read
// from the store within spentFresh, with the calls charged since.
func (c *Checker) spentBy(ctx context.Context, principal string, month, day, now time.Time) ([2]store.Spend, error) {
	c.mu.Lock()
	e := c.spent[principal]
	if e != nil && e.month.Equal(month) && e.day.Equal(day) && now.Sub(e.read) < spentFresh && !now.Before(e.read) {
		spent := e.spent
		c.mu.Unlock()
		return spent, nil
	}
	c.mu.Unlock()
	got, err := c.spending.Spent(ctx, principal, month, day)
	if err != nil {
		return [2]store.Spend{}, err
	}
	var spent [2]store.Spend
	copy(spent[:], got)
	c.mu.Lock()
	if len(c.spent) >= maxKnownOwners {
		clear(c.spent)
	}
	c.spent[principal] = &spentEntry{month: month, day: day, read: now, spent: spent}
	c.mu.Unlock()
	return spent, nil
}

// principal is the owner of thread; a thread nobody owns (made outside
// the protocols) is the anonymous principal's.
func (c *Checker) principal(ctx context.Context, thread string) (string, error) {
	c.mu.Lock()
	p, ok := c.owner[thread]
	c.mu.Unlock()
	if ok {
		return p, nil
	}
	p, ok, err := c.owners.ThreadOwner(ctx, thread)
	if err != nil {
		return "", fmt.Errorf("read the owner of thread %q: %w", thread, err)
	}
	if !ok {
		return identity.Anonymous.ID, nil
	}
	c.mu.Lock()
	if len(c.owner) >= maxKnownOwners {
		clear(c.owner)
	}
	c.owner[thread] = p
	c.mu.Unlock()
	return p, nil
}
