package protocol

import (
	"errors"
	"fmt"

	"github.com/agentwire/agentwire/internal/wire"
)

// Code is a kind of failure every protocol can report. Each adapter maps
// the codes onto its own frames or statuses (agentchat's `error` text, the
// threads API's status and JSON body, AG2's `error_code`, Loom's and
// AgentLoop's `error`): that mapping is the only place a protocol decides
// how a failure looks on its wire.
type Code string

// The codes.
const (
	// CodeInvalid: a message does not match its schema; Path says where.
	CodeInvalid Code = "invalid"
	// CodeUnknownType: a message's type is none of the protocol's; Type
	// holds it.
	CodeUnknownType Code = "unknown_type"
	// CodeNotFound: the thread, or the run a command is for, does not
	// exist.
	CodeNotFound Code = "not_found"
	// CodeUnknownRequest: an answer names no pending request (never asked,
	// answered already, timed out).
	CodeUnknownRequest Code = "unknown_request"
	// CodeBusy: the request conflicts with what is going on.
	CodeBusy Code = "busy"
	// CodeRateLimited: the client sent too much too fast.
	CodeRateLimited Code = "rate_limited"
	// CodeForbidden: the principal may not do this.
	CodeForbidden Code = "forbidden"
	// CodeUnauthenticated: the request carries no valid credentials.
	CodeUnauthenticated Code = "unauthenticated"
	// CodeUnavailable: the server cannot serve this now (shutting down,
	// store unreachable); trying again later may work.
	CodeUnavailable Code = "unavailable"
	// CodeInternal: the server failed; Message says nothing of why, Cause
	// does, for the log.
	CodeInternal Code = "internal"
)

// Error is a failure as a protocol reports it: Code for the adapter's
// mapping, Message for the client, Cause for the server's log.
type Error struct {
	Code Code
	// Message says what went wrong, for people; it never holds internal
	// details (those are in Cause).
	Message string
	// Path is the JSON Pointer of the offending value (CodeInvalid).
	Path string
	// Type is the message type concerned: the unknown one for
	// CodeUnknownType, the invalid message's for CodeInvalid, if known.
	Type string
	// Cause is the underlying error, for the log.
	Cause error
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return fmt.Sprintf("%s: %s (%v)", e.Code, e.Message, e.Cause)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Cause }

// ClientMessage is the message for the client, for packages below protocol
// that report an error they did not make (a run that could not start).
func (e *Error) ClientMessage() string { return e.Message }

// Errorf returns an *Error with code and a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns an *Error with code and message caused by cause.
func Wrap(code Code, cause error, message string) *Error {
	return &Error{Code: code, Message: message, Cause: cause}
}

// Internal is the *Error of a failure the client cannot act on: the
// message is generic, the cause goes to the log.
func Internal(cause error) *Error {
	return &Error{Code: CodeInternal, Message: "internal error", Cause: cause}
}

// AsError returns err as an *Error: err's own *Error if it has one, a
// decoding failure (*wire.Error) as CodeInvalid or CodeUnknownType with its
// path and reason, anything else as CodeInternal. A nil err returns nil.
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	var pe *Error
	if errors.As(err, &pe) {
		return pe
	}
	if we, ok := wire.AsError(err); ok {
		if we.Kind == wire.KindUnknownType {
			return &Error{Code: CodeUnknownType, Message: we.Error(), Path: we.Path, Type: we.Message, Cause: err}
		}
		return &Error{Code: CodeInvalid, Message: we.Error(), Path: we.Path, Type: we.Message, Cause: err}
	}
	return Internal(err)
}
