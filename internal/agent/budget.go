package agent

// Budgets: before each model call a run asks its principal's budget
// (Config.Budget) whether the call may be made.

import (
	"context"
	"fmt"
	"iter"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/llm"
)

// Budget limits the model calls of the runs of a thread's principal
// (budget.Checker).
type Budget interface {
	// Check returns the budget.exceeded that refuses the next model call
	// of a run of thread, or nil when it may be made; err says the budget
	// could not be checked.
	Check(ctx context.Context, thread string) (*event.BudgetExceeded, error)
	// Cost is the cost in USD of a call's tokens on model, which the
	// call's usage event records.
	Cost(model string, prompt, completion int64) float64
	// Charge tells the budget that a call of a run of thread used tokens
	// and cost, as its usage event records.
	Charge(thread string, tokens int64, cost float64)
}

// budgetError is a model call refused by a budget: the run ends with the
// budget.exceeded and run.failed code budget_exceeded (see end).
type budgetError struct{ ex event.BudgetExceeded }

func (e *budgetError) Error() string { return e.ex.Message }

// call is every model call of a run: the budget's check (nothing is
// streamed when it refuses the call), then m.Stream(ctx, req) traced.
func (r *run) call(ctx context.Context, m llm.Model, req llm.Request, what string) iter.Seq2[llm.Chunk, error] {
	return func(yield func(llm.Chunk, error) bool) {
		if err := r.checkBudget(ctx); err != nil {
			yield(llm.Chunk{}, err)
			return
		}
		for ch, err := range streamTraced(ctx, m, req, what) {
			if !yield(ch, err) {
				return
			}
		}
	}
}

// checkBudget asks the budget, if there is one, whether the run may call
// the model now. The usage of the run's calls so far is committed first,
// so that the check counts it.
func (r *run) checkBudget(ctx context.Context) error {
	b := r.a.cfg.Budget
	if b == nil {
		return nil
	}
	if err := r.em.flush(); err != nil {
		return err
	}
	ex, err := b.Check(ctx, r.spec.Thread)
	if err != nil {
		return fmt.Errorf("the budget could not be checked: %w", err)
	}
	if ex != nil {
		return &budgetError{ex: *ex}
	}
	return nil
}

// usage is the usage event of a call to m that used u, priced by the
// budget when there is one.
func (r *run) usage(m llm.Model, u llm.Usage, purpose string) event.Usage {
	e := event.Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.Total(), Purpose: purpose}
	if b := r.a.cfg.Budget; b != nil {
		e.Cost = b.Cost(modelName(m), u.PromptTokens, u.CompletionTokens)
		b.Charge(r.spec.Thread, e.TotalTokens, e.Cost)
	}
	return e
}
