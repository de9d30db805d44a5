// Package identity says who makes a request. One middleware puts a
// Principal into the context of every request, WebSocket upgrades and
// plain HTTP alike, before any protocol handler runs; everything below it
// (the core, the runs, the tools) reads the principal from the context it
// is given. By default every request is made by the anonymous principal;
// an Authenticator that checks API keys or tokens decides otherwise.
package identity

import (
	"context"
	"errors"
	"net/http"
)

// Principal is who makes a request: the owner of the threads it creates.
type Principal struct {
	// ID names the principal: an API key's principal name or a token's
	// subject; "anonymous" for requests without credentials.
	ID string
}

// Anonymous is the principal of requests made without credentials when
// the server asks for none.
var Anonymous = Principal{ID: "anonymous"}

// IsAnonymous reports whether p is the anonymous principal.
func (p Principal) IsAnonymous() bool { return p.ID == Anonymous.ID }

type ctxKey struct{}

// NewContext returns ctx carrying p.
func NewContext(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, ctxKey{}, p)
}

// FromContext returns the principal ctx carries, or Anonymous when it
// carries none.
func FromContext(ctx context.Context) Principal {
	if p, ok := ctx.Value(ctxKey{}).(Principal); ok {
		return p
	}
	return Anonymous
}

// ErrUnauthenticated is matched by what an Authenticator returns for a
// request whose credentials are missing or not valid.
var ErrUnauthenticated = errors.New("identity: missing or invalid credentials")

// AuthError refuses a request's credentials and says why, in words that
// may go to the client: never the credential itself.
type AuthError struct{ Reason string }

func (e *AuthError) Error() string { return "authentication required: " + e.Reason }

// Is makes errors.Is(err, ErrUnauthenticated) hold.
func (e *AuthError) Is(target error) bool { return target == ErrUnauthenticated }

// Authenticator decides who makes a request.
type Authenticator interface {
	// Authenticate returns the request's principal, or an error wrapping
	// ErrUnauthenticated when its credentials are missing or bad.
	Authenticate(r *http.Request) (Principal, error)
}

// AuthenticatorFunc adapts a function to Authenticator.
type AuthenticatorFunc func(r *http.Request) (Principal, error)

// Authenticate implements Authenticator.
func (f AuthenticatorFunc) Authenticate(r *http.Request) (Principal, error) { return f(r) }

// None is the Authenticator of a server that asks for no credentials:
// every request is Anonymous's.
var None Authenticator = AuthenticatorFunc(func(*http.Request) (Principal, error) { return Anonymous, nil })

// Middleware runs next with the request's principal in its context. A
// request the authenticator refuses is answered 401 before next sees it,
// which for a WebSocket means before the upgrade.
func Middleware(a Authenticator, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := a.Authenticate(r)
		if err != nil {
			msg := "authentication required"
			var ae *AuthError
			if errors.As(err, &ae) {
				msg = ae.Error()
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="agentwire"`)
			http.Error(w, msg, http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r.WithContext(NewContext(r.Context(), p)))
	})
}
