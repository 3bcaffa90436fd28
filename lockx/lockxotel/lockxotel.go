// Package lockxotel reports lockx locks to OpenTelemetry: a span per
// acquire (including its wait), extend and release, and metrics for acquire
// latency, wait time, hold time, outcomes, renewals, lost locks, locks held,
// waiters and circuit-breaker state.
//
// It is a separate package so that programs that do not use OpenTelemetry
// never compile it. Plug it into a client with lockx.WithObserver:
//
//	obs := lockxotel.New(otel.GetTracerProvider(), otel.GetMeterProvider())
//	client := lockx.New(backend, lockx.WithObserver(obs))
//
// Keys appear on spans only (attribute lockx.key, redactable with
// WithKeyAttribute), never on metrics: lock keys are often made up per
// request and would explode the metrics' cardinality. Metric attributes are
// lockx.kind, lockx.backend, lockx.outcome and (on acquires) lockx.fair.
//
// Spans are recorded when an operation has ended, with its real start and
// end times, as children of the caller's span; backend calls made inside an
// acquire are therefore siblings, not children, of the acquire span.
// Watchdog renewals run outside any request and are counted in metrics but
// not traced unless WithWatchdogSpans is given.
package lockxotel

import (
	"context"
	"strings"

	"github.com/lockx-go/lockx/lockx"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the tracer and meter.
const ScopeName = "github.com/lockx-go/lockx/lockx/lockxotel"

// Span names and attribute keys.
const (
	SpanAcquire = "lockx.acquire"
	SpanExtend  = "lockx.extend"
	SpanRelease = "lockx.release"

	AttrKey      = attribute.Key("lockx.key")
	AttrKind     = attribute.Key("lockx.kind")
	AttrBackend  = attribute.Key("lockx.backend")
	AttrOutcome  = attribute.Key("lockx.outcome")
	AttrToken    = attribute.Key("lockx.token")
	AttrFair     = attribute.Key("lockx.fair")
	AttrWait     = attribute.Key("lockx.wait")
	AttrAttempts = attribute.Key("lockx.attempts")
	AttrWaitTime = attribute.Key("lockx.wait_time_ms")
	AttrReentry  = attribute.Key("lockx.reentry")
	AttrFinal    = attribute.Key("lockx.final")
	AttrWatchdog = attribute.Key("lockx.watchdog")
	AttrBreaker  = attribute.Key("lockx.breaker")
)

// Metric names.
const (
	MetricAcquireDuration = "lockx.acquire.duration" // histogram, s: whole call
	MetricAcquireWait     = "lockx.acquire.wait"     // histogram, s: time waiting for the holder
	MetricAcquires        = "lockx.acquires"         // counter: calls by outcome
	MetricHoldDuration    = "lockx.hold.duration"    // histogram, s: grant to end, by outcome (ok, lost, closed)
	MetricRenewals        = "lockx.renewals"         // counter: lease renewals by outcome
	MetricReleases        = "lockx.releases"         // counter: Release calls by outcome
	MetricLost            = "lockx.lost"             // counter: locks lost
	MetricHeld            = "lockx.held"             // up-down counter: locks held now
	MetricWaiters         = "lockx.waiters"          // up-down counter: callers waiting now
	MetricBreakerState    = "lockx.breaker.state"    // gauge: 0 closed, 1 half-open, 2 open
	MetricBreakerChanges  = "lockx.breaker.transitions"
)

// Option configures an Observer.
type Option func(*Observer)

// WithKeyAttribute sets how a lock key appears on spans: f returns the
// value of lockx.key, or "" to leave the attribute out. The default is the
// key itself. Use it to hash or truncate keys that carry personal data.
func WithKeyAttribute(f func(key string) string) Option {
	return func(o *Observer) { o.redact = f }
}

// WithWatchdogSpans records a span for every watchdog renewal too. They are
// root spans (no request is waiting on them), one per lock per lease/3.
func WithWatchdogSpans() Option { return func(o *Observer) { o.watchdogSpans = true } }

// Observer is a lockx.Observer recording to OpenTelemetry.
type Observer struct {
	lockx.NopObserver
	tracer        trace.Tracer // nil: no spans
	redact        func(string) string
	watchdogSpans bool

	acquireDur  metric.Float64Histogram
	acquireWait metric.Float64Histogram
	acquires    metric.Int64Counter
	holdDur     metric.Float64Histogram
	renewals    metric.Int64Counter
	releases    metric.Int64Counter
	lost        metric.Int64Counter
	held        metric.Int64UpDownCounter
	waiters     metric.Int64UpDownCounter
	brState     metric.Int64Gauge
	brChanges   metric.Int64Counter
	metricsOn   bool
}

var _ lockx.Observer = (*Observer)(nil)

// latencyBuckets (seconds) span a local acquire (100 µs) to a long wait.
var latencyBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// holdBuckets (seconds) span a short critical section to a cron job.
var holdBuckets = []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600}

// New returns an Observer that traces through tp and measures through mp;
// either may be nil to skip spans or metrics. Instruments that mp fails to
// create are replaced by no-ops (OpenTelemetry reports such errors through
// its global error handler).
func New(tp trace.TracerProvider, mp metric.MeterProvider, opts ...Option) *Observer {
	o := &Observer{}
	for _, opt := range opts {
		if opt != nil {
			opt(o)
		}
	}
	if tp != nil {
		o.tracer = tp.Tracer(ScopeName)
	}
	if mp == nil {
		return o
	}
	m := mp.Meter(ScopeName)
	o.metricsOn = true
	o.acquireDur, _ = m.Float64Histogram(MetricAcquireDuration, metric.WithUnit("s"),
		metric.WithDescription("Duration of lock acquisition calls, waiting included."),
		metric.WithExplicitBucketBoundaries(latencyBuckets...))
	o.acquireWait, _ = m.Float64Histogram(MetricAcquireWait, metric.WithUnit("s"),
		metric.WithDescription("Time acquisition calls spent waiting for another holder."),
		metric.WithExplicitBucketBoundaries(latencyBuckets...))
	o.acquires, _ = m.Int64Counter(MetricAcquires, metric.WithUnit("{call}"),
		metric.WithDescription("Lock acquisition calls by outcome."))
	o.holdDur, _ = m.Float64Histogram(MetricHoldDuration, metric.WithUnit("s"),
		metric.WithDescription("How long locks were held, by how the hold ended."),
		metric.WithExplicitBucketBoundaries(holdBuckets...))
	o.renewals, _ = m.Int64Counter(MetricRenewals, metric.WithUnit("{renewal}"),
		metric.WithDescription("Lease renewals by outcome."))
	o.releases, _ = m.Int64Counter(MetricReleases, metric.WithUnit("{call}"),
		metric.WithDescription("Release calls by outcome."))
	o.lost, _ = m.Int64Counter(MetricLost, metric.WithUnit("{lock}"),
		metric.WithDescription("Locks lost: renewal failed or the lease ran out."))
	o.held, _ = m.Int64UpDownCounter(MetricHeld, metric.WithUnit("{lock}"),
		metric.WithDescription("Locks held by this process."))
	o.waiters, _ = m.Int64UpDownCounter(MetricWaiters, metric.WithUnit("{caller}"),
		metric.WithDescription("Callers waiting for a lock held by someone else."))
	o.brState, _ = m.Int64Gauge(MetricBreakerState, metric.WithUnit("1"),
		metric.WithDescription("Circuit breaker state: 0 closed, 1 half-open, 2 open."))
	o.brChanges, _ = m.Int64Counter(MetricBreakerChanges, metric.WithUnit("{transition}"),
		metric.WithDescription("Circuit breaker state changes, by new state."))
	return o
}

func (o *Observer) keyAttr(key string) (attribute.KeyValue, bool) {
	if o.redact == nil {
		return AttrKey.String(key), true
	}
	if v := o.redact(key); v != "" {
		return AttrKey.String(v), true
	}
	return attribute.KeyValue{}, false
}

// spanStatus marks spans of failed operations as errors. A refusal or a
// wait that ran out is an expected outcome of a lock, not an error.
func spanStatus(span trace.Span, s lockx.Status, err error) {
	switch s {
	case lockx.StatusOK, lockx.StatusNotAcquired, lockx.StatusTimeout, lockx.StatusCanceled:
		return
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
}

// Acquired implements lockx.Observer.
func (o *Observer) Acquired(ctx context.Context, e lockx.AcquireEvent) {
	if o.tracer != nil {
		attrs := make([]attribute.KeyValue, 0, 10)
		if kv, ok := o.keyAttr(e.Key); ok {
			attrs = append(attrs, kv)
		}
		attrs = append(attrs,
			AttrKind.String(e.Kind), AttrBackend.String(e.Backend),
			AttrOutcome.String(string(e.Status)), AttrFair.Bool(e.Fair),
			AttrWait.Bool(e.Wait), AttrAttempts.Int(e.Attempts),
			AttrWaitTime.Float64(float64(e.WaitTime.Microseconds())/1000))
		if e.Status == lockx.StatusOK {
			attrs = append(attrs, AttrToken.Int64(int64(e.Token)), AttrReentry.Bool(e.Reentry))
		}
		_, span := o.tracer.Start(ctx, SpanAcquire, trace.WithTimestamp(e.Start),
			trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
		spanStatus(span, e.Status, e.Err)
		span.End(trace.WithTimestamp(e.Start.Add(e.Duration)))
	}
	if !o.metricsOn {
		return
	}
	base := attribute.NewSet(AttrKind.String(e.Kind), AttrBackend.String(e.Backend),
		AttrOutcome.String(string(e.Status)), AttrFair.Bool(e.Fair))
	opt := metric.WithAttributeSet(base)
	o.acquires.Add(ctx, 1, opt)
	o.acquireDur.Record(ctx, e.Duration.Seconds(), opt)
	if e.Wait && e.Attempts > 0 {
		o.acquireWait.Record(ctx, e.WaitTime.Seconds(), opt)
	}
	if e.NewHold {
		o.held.Add(ctx, 1, metric.WithAttributeSet(kindSet(e.Kind, e.Backend)))
	}
}

func kindSet(kind, backend string) attribute.Set {
	return attribute.NewSet(AttrKind.String(kind), AttrBackend.String(backend))
}

// Extended implements lockx.Observer.
func (o *Observer) Extended(ctx context.Context, e lockx.ExtendEvent) {
	if o.tracer != nil && (!e.Watchdog || o.watchdogSpans) {
		attrs := make([]attribute.KeyValue, 0, 7)
		if kv, ok := o.keyAttr(e.Key); ok {
			attrs = append(attrs, kv)
		}
		attrs = append(attrs, AttrKind.String(e.Kind), AttrBackend.String(e.Backend),
			AttrOutcome.String(string(e.Status)), AttrToken.Int64(int64(e.Token)), AttrWatchdog.Bool(e.Watchdog))
		sctx := ctx
		if e.Watchdog {
			sctx = context.Background()
		}
		_, span := o.tracer.Start(sctx, SpanExtend, trace.WithTimestamp(e.Start),
			trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
		spanStatus(span, e.Status, e.Err)
		span.End(trace.WithTimestamp(e.Start.Add(e.Duration)))
	}
	if o.metricsOn {
		o.renewals.Add(ctx, 1, metric.WithAttributes(AttrKind.String(e.Kind), AttrBackend.String(e.Backend),
			AttrOutcome.String(string(e.Status)), AttrWatchdog.Bool(e.Watchdog)))
	}
}

// Released implements lockx.Observer.
func (o *Observer) Released(ctx context.Context, e lockx.ReleaseEvent) {
	if o.tracer != nil {
		attrs := make([]attribute.KeyValue, 0, 7)
		if kv, ok := o.keyAttr(e.Key); ok {
			attrs = append(attrs, kv)
		}
		attrs = append(attrs, AttrKind.String(e.Kind), AttrBackend.String(e.Backend),
			AttrOutcome.String(string(e.Status)), AttrToken.Int64(int64(e.Token)), AttrFinal.Bool(e.Final))
		_, span := o.tracer.Start(ctx, SpanRelease, trace.WithTimestamp(e.Start),
			trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
		spanStatus(span, e.Status, e.Err)
		span.End(trace.WithTimestamp(e.Start.Add(e.Duration)))
	}
	if o.metricsOn {
		o.releases.Add(ctx, 1, metric.WithAttributes(AttrKind.String(e.Kind), AttrBackend.String(e.Backend),
			AttrOutcome.String(string(e.Status))))
	}
}

// HoldEnded implements lockx.Observer.
func (o *Observer) HoldEnded(e lockx.HoldEvent) {
	if !o.metricsOn {
		return
	}
	ctx := context.Background()
	ks := metric.WithAttributeSet(kindSet(e.Kind, e.Backend))
	o.held.Add(ctx, -1, ks)
	o.holdDur.Record(ctx, e.Held.Seconds(), metric.WithAttributes(AttrKind.String(e.Kind),
		AttrBackend.String(e.Backend), AttrOutcome.String(string(e.Status))))
	if e.Status == lockx.StatusLost {
		o.lost.Add(ctx, 1, ks)
	}
}

// Waiting implements lockx.Observer.
func (o *Observer) Waiting(kind, _ string, delta int) {
	if o.metricsOn {
		o.waiters.Add(context.Background(), int64(delta), metric.WithAttributes(AttrKind.String(kind)))
	}
}

// BreakerStateChanged records a circuit breaker's state change; pass it to
// breaker.OnStateChange. to is "closed", "half-open" or "open".
func (o *Observer) BreakerStateChanged(name, from, to string) {
	if !o.metricsOn {
		return
	}
	var v int64
	switch strings.ToLower(to) {
	case "half-open":
		v = 1
	case "open":
		v = 2
	}
	ctx := context.Background()
	o.brState.Record(ctx, v, metric.WithAttributes(AttrBreaker.String(name)))
	o.brChanges.Add(ctx, 1, metric.WithAttributes(AttrBreaker.String(name), AttrOutcome.String(to)))
}
