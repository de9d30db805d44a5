package llm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
)

// Endpoint says where a provider's calls go and how a person configures
// it, so that a failed call can say what to change.
type Endpoint struct {
	// Provider names the API: "openai", "anthropic" or "gemini".
	Provider string
	// Model is the model the calls name.
	Model string
	// URL is where the calls go (the base URL).
	URL string
	// URLVar names the variable that sets URL, if one does
	// (OPENAI_BASE_URL).
	URLVar string
	// KeyVar names the variable that holds the API key.
	KeyVar string
}

// CallError is a model call that failed, said so that a person can act on
// it: the provider, the model and the URL tried, what went wrong, and what
// to change. Err, the cause, is what the log keeps; errors.As still finds
// an *APIError beneath it.
type CallError struct {
	Endpoint
	// Problem says what went wrong, in a few words ("cannot be reached").
	Problem string
	// Fix says what to change ("check OPENAI_BASE_URL").
	Fix string
	Err error
}

func (e *CallError) Error() string {
	s := fmt.Sprintf("%s model %q at %s %s", e.Provider, e.Model, e.URL, e.Problem)
	if e.Fix != "" {
		s += ": " + e.Fix
	}
	return s
}

func (e *CallError) Unwrap() error { return e.Err }

// Explain returns err, a model call's failure at ep, as a *CallError that
// says what to change; ctx's cancellation, and errors that already are
// one, are returned as they are.
func Explain(ep Endpoint, err error) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if _, ok := errors.AsType[*CallError](err); ok {
		return err
	}
	e := &CallError{Endpoint: ep, Err: err}
	where := "the URL"
	if ep.URLVar != "" {
		where = ep.URLVar
	}
	if a, ok := errors.AsType[*APIError](err); ok {
		detail := a.Message
		if detail == "" {
			detail = http.StatusText(a.StatusCode)
		}
		if detail == "" {
			detail = "no message"
		}
		switch {
		case a.StatusCode == http.StatusUnauthorized || a.StatusCode == http.StatusForbidden,
			// Gemini answers a bad key with 400 INVALID_ARGUMENT.
			a.StatusCode == http.StatusBadRequest && strings.Contains(strings.ToLower(detail), "api key"):
			e.Problem = fmt.Sprintf("refused the API key (%d %s)", a.StatusCode, detail)
			e.Fix = fmt.Sprintf("set a valid key in %s", ep.KeyVar)
			if ep.URLVar != "" {
				e.Fix += fmt.Sprintf(", or check that %s names the server the key is for", ep.URLVar)
			}
		case a.StatusCode == http.StatusNotFound:
			e.Problem = fmt.Sprintf("has no model %q, or no such API (404 %s)", ep.Model, detail)
			e.Fix = fmt.Sprintf("check --model (the server's model list names those it has) and %s", where)
		case a.StatusCode == http.StatusTooManyRequests:
			e.Problem = fmt.Sprintf("is limiting requests (429 %s)", detail)
			e.Fix = "wait a little and try again, or check the account's quota"
		case a.StatusCode >= 500:
			e.Problem = fmt.Sprintf("failed (%d %s)", a.StatusCode, detail)
			e.Fix = "the provider's server had a problem: try again in a moment"
		case a.StatusCode >= 400:
			e.Problem = fmt.Sprintf("refused the request (%d %s)", a.StatusCode, detail)
			e.Fix = fmt.Sprintf("check --model and that %s serves this provider's API", where)
		default:
			// An error event in the stream, with no status.
			if a.Type != "" {
				detail = a.Type + ": " + detail
			}
			e.Problem = "reported an error (" + detail + ")"
		}
		return e
	}
	if unreachable(err) {
		e.Problem = "cannot be reached (" + rootCause(err) + ")"
		if ep.URLVar != "" {
			e.Fix = fmt.Sprintf("check %s (or leave it unset for the provider's own API), and that the server it names is running", ep.URLVar)
		} else {
			e.Fix = "check this machine's network and proxy settings"
		}
		return e
	}
	e.Problem = "failed: " + err.Error()
	return e
}

// ExplainCall is Explain for a provider's call: err is first mapped by
// apiError, the provider's reading of its SDK's errors, to the *APIError
// the API reported, where it is one.
func ExplainCall(ep Endpoint, err error, apiError func(error) *APIError) error {
	if err == nil {
		return nil
	}
	if a := apiError(err); a != nil {
		err = a
	}
	return Explain(ep, err)
}

// NoSuchModel is the *CallError of a server that was reached but does not
// serve ep.Model; have lists the models it does, which the error names
// (the first few of them).
func NoSuchModel(ep Endpoint, have []string) error {
	e := &CallError{Endpoint: ep, Problem: fmt.Sprintf("has no model %q", ep.Model)}
	const most = 8
	switch n := len(have); {
	case n == 0:
		e.Problem += " (it lists none)"
		e.Fix = "check --model, and that the server has loaded a model"
	case n <= most:
		e.Problem += " (it has " + strings.Join(have, ", ") + ")"
		e.Fix = "set --model to one of them"
	default:
		e.Problem += fmt.Sprintf(" (it has %s and %d more)", strings.Join(have[:most], ", "), n-most)
		e.Fix = "set --model to one of them"
	}
	return e
}

// unreachable reports whether err says the server could not be reached:
// refused, unknown host, no route, a timeout before any answer.
func unreachable(err error) bool {
	var dns *net.DNSError
	var op *net.OpError
	switch {
	case errors.As(err, &dns), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EHOSTUNREACH),
		errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.ECONNRESET):
		return true
	case errors.As(err, &op) && op.Op == "dial":
		return true
	}
	var u *url.Error
	return errors.As(err, &u) && u.Timeout()
}

// rootCause is the innermost error's text, or err's when it is short: what
// a person needs of a long chain of wrapping.
func rootCause(err error) string {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			break
		}
		err = next
	}
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 && len(s) > 80 {
		s = s[i+2:]
	}
	return s
}
