package lockxotel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/lockxotel"
	"github.com/lockx-go/lockx/lockx/memlock"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// down is a backend whose every call fails as a transport error would.
type down struct{ *memlock.Backend }

func (down) Acquire(context.Context, driver.Request) (driver.Result, error) {
	return driver.Result{}, driver.Unavailable("acquire", errors.New("connection refused"))
}

type telemetry struct {
	spans  *tracetest.InMemoryExporter
	reader *sdkmetric.ManualReader
	obs    *lockxotel.Observer
}

func newTelemetry(t *testing.T, opts ...lockxotel.Option) *telemetry {
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() {
		_ = tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	return &telemetry{spans: spans, reader: reader, obs: lockxotel.New(tp, mp, opts...)}
}

func (tm *telemetry) metrics(t *testing.T) map[string]metricdata.Aggregation {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := tm.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != lockxotel.ScopeName {
			t.Errorf("scope %q", sm.Scope.Name)
		}
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

func attr(set attribute.Set, k attribute.Key) string {
	v, _ := set.Value(k)
	return v.String()
}

// sumByOutcome adds up a counter's points per lockx.outcome.
func sumByOutcome(t *testing.T, a metricdata.Aggregation) map[string]int64 {
	t.Helper()
	s, ok := a.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("not an int64 sum: %T", a)
	}
	out := map[string]int64{}
	for _, p := range s.DataPoints {
		out[attr(p.Attributes, lockxotel.AttrOutcome)] += p.Value
	}
	return out
}

func sum(t *testing.T, a metricdata.Aggregation) int64 {
	t.Helper()
	var n int64
	for _, v := range sumByOutcome(t, a) {
		n += v
	}
	return n
}

func TestSpansAndMetrics(t *testing.T) {
	tm := newTelemetry(t)
	ctx := context.Background()
	c := lockx.New(memlock.New(), lockx.WithObserver(tm.obs))
	defer c.Close()

	// success
	l, err := c.Acquire(ctx, "orders/1")
	if err != nil {
		t.Fatal(err)
	}
	// timeout: waits for the holder until the deadline
	wctx, cancel := context.WithTimeout(ctx, 120*time.Millisecond)
	if _, err := c.Acquire(wctx, "orders/1"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want timeout, got %v", err)
	}
	cancel()
	// not acquired
	if _, err := c.TryAcquire(ctx, "orders/1"); !errors.Is(err, lockx.ErrNotAcquired) {
		t.Fatalf("want not acquired, got %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// lost: an explicit lease that runs out
	short, err := c.Acquire(ctx, "orders/2", lockx.WithLease(40*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	<-short.Lost()
	if err := short.Release(ctx); !errors.Is(err, lockx.ErrLost) {
		t.Fatalf("want lost, got %v", err)
	}
	// unavailable
	cd := lockx.New(down{memlock.New()}, lockx.WithObserver(tm.obs))
	defer cd.Close()
	if _, err := cd.TryAcquire(ctx, "orders/3"); !errors.Is(err, lockx.ErrUnavailable) {
		t.Fatalf("want unavailable, got %v", err)
	}

	// Spans.
	var acquires, releases []tracetest.SpanStub
	for _, s := range tm.spans.GetSpans() {
		switch s.Name {
		case lockxotel.SpanAcquire:
			acquires = append(acquires, s)
		case lockxotel.SpanRelease:
			releases = append(releases, s)
		default:
			t.Errorf("unexpected span %q", s.Name)
		}
	}
	wantOutcomes := []string{"ok", "timeout", "not_acquired", "ok", "unavailable"}
	if len(acquires) != len(wantOutcomes) {
		t.Fatalf("%d acquire spans, want %d", len(acquires), len(wantOutcomes))
	}
	for i, s := range acquires {
		set := attribute.NewSet(s.Attributes...)
		if got := attr(set, lockxotel.AttrOutcome); got != wantOutcomes[i] {
			t.Errorf("acquire span %d outcome %q, want %q", i, got, wantOutcomes[i])
		}
		if k := attr(set, lockxotel.AttrKey); k[:7] != "orders/" {
			t.Errorf("acquire span %d key %q", i, k)
		}
		if attr(set, lockxotel.AttrKind) != "lock" {
			t.Errorf("acquire span %d kind %q", i, attr(set, lockxotel.AttrKind))
		}
		if wantOutcomes[i] == "ok" && attr(set, lockxotel.AttrToken) == "" {
			t.Errorf("acquire span %d has no token", i)
		}
		isErr := s.Status.Code == codes.Error
		if isErr != (wantOutcomes[i] == "unavailable") {
			t.Errorf("acquire span %d status %v", i, s.Status)
		}
		if !s.EndTime.After(s.StartTime) {
			t.Errorf("acquire span %d: start %v end %v", i, s.StartTime, s.EndTime)
		}
	}
	if d := acquires[1].EndTime.Sub(acquires[1].StartTime); d < 100*time.Millisecond {
		t.Errorf("timed-out acquire span lasted %v, want its wait included", d)
	}
	if be := attribute.NewSet(acquires[0].Attributes...); attr(be, lockxotel.AttrBackend) != "*memlock.Backend" {
		t.Errorf("backend attribute %q", attr(be, lockxotel.AttrBackend))
	}
	if len(releases) != 2 {
		t.Fatalf("%d release spans, want 2", len(releases))
	}
	if got := attr(attribute.NewSet(releases[1].Attributes...), lockxotel.AttrOutcome); got != "lost" {
		t.Errorf("release of lost lock: outcome %q", got)
	}

	// Metrics.
	m := tm.metrics(t)
	got := sumByOutcome(t, m[lockxotel.MetricAcquires])
	want := map[string]int64{"ok": 2, "timeout": 1, "not_acquired": 1, "unavailable": 1}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("acquires{outcome=%s} = %d, want %d (all: %v)", k, got[k], v, got)
		}
	}
	if n := sum(t, m[lockxotel.MetricLost]); n != 1 {
		t.Errorf("lost = %d, want 1", n)
	}
	if n := sum(t, m[lockxotel.MetricHeld]); n != 0 {
		t.Errorf("held = %d, want 0 after every release", n)
	}
	if n := sum(t, m[lockxotel.MetricWaiters]); n != 0 {
		t.Errorf("waiters = %d, want 0", n)
	}
	h, ok := m[lockxotel.MetricAcquireDuration].(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("acquire duration: %T", m[lockxotel.MetricAcquireDuration])
	}
	var count uint64
	for _, p := range h.DataPoints {
		count += p.Count
		if attr(p.Attributes, lockxotel.AttrKey) != "" {
			t.Error("key on a metric: unbounded cardinality")
		}
	}
	if count != 5 {
		t.Errorf("acquire duration count %d, want 5", count)
	}
	hold, ok := m[lockxotel.MetricHoldDuration].(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("hold duration: %T", m[lockxotel.MetricHoldDuration])
	}
	holds := map[string]uint64{}
	for _, p := range hold.DataPoints {
		holds[attr(p.Attributes, lockxotel.AttrOutcome)] += p.Count
	}
	if holds["ok"] != 1 || holds["lost"] != 1 {
		t.Errorf("hold durations by outcome: %v", holds)
	}
	if _, ok := m[lockxotel.MetricAcquireWait]; !ok {
		t.Error("no acquire wait histogram")
	}
}

func TestHeldGaugeAndRenewals(t *testing.T) {
	tm := newTelemetry(t)
	ctx := context.Background()
	c := lockx.New(memlock.New(), lockx.WithObserver(tm.obs), lockx.WithWatchdog(90*time.Millisecond))
	defer c.Close()
	a, err := c.Acquire(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Acquire(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	m := tm.metrics(t)
	if n := sum(t, m[lockxotel.MetricHeld]); n != 2 {
		t.Errorf("held = %d, want 2", n)
	}
	if r := sumByOutcome(t, m[lockxotel.MetricRenewals]); r["ok"] < 2 {
		t.Errorf("renewals %v, want ≥ 2 ok", r)
	}
	_ = a.Release(ctx)
	_ = b.Release(ctx)
	if n := sum(t, tm.metrics(t)[lockxotel.MetricHeld]); n != 0 {
		t.Errorf("held = %d after release, want 0", n)
	}
	for _, s := range tm.spans.GetSpans() {
		if s.Name == lockxotel.SpanExtend {
			t.Error("watchdog renewal traced without WithWatchdogSpans")
		}
	}
}

func TestKeyRedaction(t *testing.T) {
	tm := newTelemetry(t, lockxotel.WithKeyAttribute(func(string) string { return "" }))
	c := lockx.New(memlock.New(), lockx.WithObserver(tm.obs))
	defer c.Close()
	l, err := c.Acquire(context.Background(), "user:alice@example.com")
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Release(context.Background())
	for _, s := range tm.spans.GetSpans() {
		if attr(attribute.NewSet(s.Attributes...), lockxotel.AttrKey) != "" {
			t.Errorf("span %s carries the key", s.Name)
		}
	}
}

func TestBreakerState(t *testing.T) {
	tm := newTelemetry(t)
	tm.obs.BreakerStateChanged("redis", "closed", "open")
	g, ok := tm.metrics(t)[lockxotel.MetricBreakerState].(metricdata.Gauge[int64])
	if !ok || len(g.DataPoints) != 1 || g.DataPoints[0].Value != 2 {
		t.Fatalf("breaker state gauge: %+v", g)
	}
}
