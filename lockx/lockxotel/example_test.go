package lockxotel_test

import (
	"context"
	"fmt"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/lockxotel"
	"github.com/lockx-go/lockx/lockx/memlock"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// Plug OpenTelemetry into a client. In production pass your providers
// (otel.GetTracerProvider(), otel.GetMeterProvider()); here in-memory ones
// show what gets recorded.
func Example() {
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	ctx := context.Background()

	locks := lockx.New(memlock.New(), lockx.WithObserver(lockxotel.New(tp, mp)))
	defer locks.Close()
	_ = locks.Do(ctx, "report:daily", func(context.Context) error { return nil })

	for _, s := range spans.GetSpans() {
		fmt.Println("span", s.Name)
	}
	var rm metricdata.ResourceMetrics
	_ = reader.Collect(ctx, &rm)
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if m.Name == lockxotel.MetricAcquires {
			p := m.Data.(metricdata.Sum[int64]).DataPoints[0]
			outcome, _ := p.Attributes.Value(lockxotel.AttrOutcome)
			fmt.Println(m.Name, "outcome="+outcome.AsString(), p.Value)
		}
	}
	// Output:
	// span lockx.acquire
	// span lockx.release
	// lockx.acquires outcome=ok 1
}

// Keys can carry personal data: hash or drop them before they reach spans.
func ExampleWithKeyAttribute() {
	obs := lockxotel.New(nil, nil, lockxotel.WithKeyAttribute(func(key string) string {
		if len(key) > 8 {
			return key[:8] + "…"
		}
		return key
	}))
	locks := lockx.New(memlock.New(), lockx.WithObserver(obs))
	defer locks.Close()
	fmt.Println(locks.Do(context.Background(), "user:alice@example.com", func(context.Context) error { return nil }))
	// Output: <nil>
}
