// Package tracing gives agentwire OpenTelemetry traces: a trace per run,
// from the protocol frame that started it through its model calls, tool
// calls and approvals, across nodes. It is off unless configured with the
// standard variables (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT; OTEL_TRACES_EXPORTER=none turns it
// off); spans then go to that OTLP/HTTP endpoint. Off, every call here is
// OpenTelemetry's no-op.
//
// A W3C traceparent header on an HTTP request or WebSocket upgrade makes
// the runs the connection starts children of the caller's trace; a run
// posted to another node carries its trace in the bus command (Traceparent
// and Remote).
package tracing

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
)

// name is the instrumentation scope of agentwire's spans.
const name = "github.com/agentwire/agentwire"

var propagator = propagation.TraceContext{}

// Setup installs the tracer provider the environment asks for (getenv
// reads it) and returns the function that flushes and stops it at
// shutdown, and where spans go ("" when tracing is off).
func Setup(ctx context.Context, getenv func(string) string, node string) (shutdown func(context.Context) error, where string, err error) {
	nothing := func(context.Context) error { return nil }
	if strings.EqualFold(getenv("OTEL_TRACES_EXPORTER"), "none") || strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return nothing, "", nil
	}
	endpoint := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if endpoint == "" {
		if base := getenv("OTEL_EXPORTER_OTLP_ENDPOINT"); base != "" {
			endpoint = strings.TrimRight(base, "/") + "/v1/traces"
		}
	}
	if endpoint == "" {
		return nothing, "", nil
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(endpoint)}
	if h := headers(getenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS") + "," + getenv("OTEL_EXPORTER_OTLP_HEADERS")); len(h) > 0 {
		opts = append(opts, otlptracehttp.WithHeaders(h))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, "", fmt.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT %s: %w", endpoint, err)
	}
	service := getenv("OTEL_SERVICE_NAME")
	if service == "" {
		service = "agentwire"
	}
	res := resource.NewSchemaless(semconv.ServiceName(service), attribute.String("agentwire.node", node))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagator)
	return tp.Shutdown, endpoint, nil
}

// headers parses OTEL_EXPORTER_OTLP_HEADERS' k=v,k=v form.
func headers(s string) map[string]string {
	h := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if k = strings.TrimSpace(k); ok && k != "" {
			h[k] = strings.TrimSpace(v)
		}
	}
	return h
}

// Tracer is agentwire's tracer: the installed provider's, or a no-op.
func Tracer() trace.Tracer { return otel.Tracer(name) }

// Start starts a span named name as a child of ctx's.
func Start(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return Tracer().Start(ctx, name, trace.WithAttributes(attrs...))
}

// Extract makes a request's traceparent header the parent of what its
// handler starts.
func Extract(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("traceparent") != "" {
			r = r.WithContext(propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header)))
		}
		next.ServeHTTP(w, r)
	})
}

// Traceparent is the W3C traceparent of ctx's span, "" when it has none.
func Traceparent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagator.Inject(ctx, c)
	return c["traceparent"]
}

// Remote returns ctx with the span of traceparent (Traceparent) as its
// parent; ctx itself when traceparent is "" or invalid.
func Remote(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return propagator.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent})
}
