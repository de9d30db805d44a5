package budget

import "time"

// Window is a span of time a budget is counted over: a calendar day or a
// calendar month in UTC, the same on every node whatever its time zone.
type Window struct {
	// Name is "day" or "month".
	Name string
	// Start is the window's first instant; End the next window's first,
	// when the budget is whole again.
	Start, End time.Time
}

// Windows.
const (
	Day   = "day"
	Month = "month"
)

// DayOf is the UTC day t is in.
func DayOf(t time.Time) Window {
	t = t.UTC()
	start := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	return Window{Name: Day, Start: start, End: start.AddDate(0, 0, 1)}
}

// MonthOf is the UTC calendar month t is in.
func MonthOf(t time.Time) Window {
	t = t.UTC()
	start := time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	return Window{Name: Month, Start: start, End: start.AddDate(0, 1, 0)}
}
