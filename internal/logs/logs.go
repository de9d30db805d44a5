// Package logs builds the server's logger and gives its lines the ids of
// what they are about. A context carries attributes (With): the id of the
// connection a request opened, the thread and run a run works on; the
// handler adds them to every line logged with that context (the
// slog.Logger methods ending in Context), so that the lines of one
// connection or one run can be picked out of a busy server's log.
package logs

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// Formats are the values of --log-format.
var Formats = []string{"text", "json"}

// New is a logger that writes lines of format ("text": key=value pairs,
// "json": one object a line) at level and above to w, with the attributes
// of the context of each line (With).
func New(w io.Writer, format string, level slog.Level) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	switch format {
	case "", "text":
		h = slog.NewTextHandler(w, opts)
	case "json":
		h = slog.NewJSONHandler(w, opts)
	default:
		return nil, fmt.Errorf("log format %q: want %s", format, strings.Join(Formats, " or "))
	}
	return slog.New(Handler(h)), nil
}

// ParseLevel reads --log-level: debug, info, warn or error (info for
// anything else; config.Validate refuses other values).
func ParseLevel(s string) slog.Level {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}

type attrsKey struct{}

// With returns ctx carrying args (slog's key-value pairs or slog.Attr
// values) beside those it carries already, for the lines logged with it
// and with the contexts derived from it.
func With(ctx context.Context, args ...any) context.Context {
	var r slog.Record
	r.Add(args...)
	attrs := append([]slog.Attr(nil), From(ctx)...)
	r.Attrs(func(a slog.Attr) bool {
		attrs = append(attrs, a)
		return true
	})
	return context.WithValue(ctx, attrsKey{}, attrs)
}

// From returns the attributes ctx carries (With).
func From(ctx context.Context) []slog.Attr {
	if ctx == nil {
		return nil
	}
	attrs, _ := ctx.Value(attrsKey{}).([]slog.Attr)
	return attrs
}

// Handler wraps h so that each line gets the attributes of its context.
func Handler(h slog.Handler) slog.Handler { return handler{h} }

type handler struct{ slog.Handler }

func (h handler) Handle(ctx context.Context, r slog.Record) error {
	if attrs := From(ctx); len(attrs) > 0 {
		r = r.Clone()
		r.AddAttrs(attrs...)
	}
	return h.Handler.Handle(ctx, r)
}

func (h handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return handler{h.Handler.WithAttrs(attrs)}
}

func (h handler) WithGroup(name string) slog.Handler {
	return handler{h.Handler.WithGroup(name)}
}

// Logger is l with the attributes ctx carries (With) on every line, for
// what logs without a context: a connection's session, with its conn id.
func Logger(ctx context.Context, l *slog.Logger) *slog.Logger {
	attrs := From(ctx)
	if len(attrs) == 0 {
		return l
	}
	args := make([]any, len(attrs))
	for i, a := range attrs {
		args[i] = a
	}
	return l.With(args...)
}

// Lazy is a logger with a context's attributes (Logger) that is made only
// when a line is logged: what a connection's session keeps, so that an
// idle connection pays two words for it, not a handler.
type Lazy struct {
	ctx context.Context
	l   *slog.Logger
}

// For returns the Lazy logger of l with ctx's attributes.
func For(ctx context.Context, l *slog.Logger) Lazy { return Lazy{ctx: ctx, l: l} }

// L is the logger.
func (z Lazy) L() *slog.Logger { return Logger(z.ctx, z.l) }
