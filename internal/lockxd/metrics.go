package lockxd

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// metrics are Prometheus text-format counters per tenant.
type metrics struct {
	mu       sync.Mutex
	requests map[[4]string]uint64 // tenant, kind, op, status
	seconds  map[[3]string]float64

	otelRequests metric.Int64Counter
	otelDuration metric.Float64Histogram
}

// otel registers the OTel instruments; errors leave them unset.
func (m *metrics) otel(mp metric.MeterProvider, a *authenticator) {
	meter := mp.Meter("github.com/lockx-go/lockx/cmd/lockxd")
	m.otelRequests, _ = meter.Int64Counter("lockxd.requests", metric.WithDescription("API requests by tenant, kind, operation and HTTP status"))
	m.otelDuration, _ = meter.Float64Histogram("lockxd.request.duration", metric.WithUnit("s"), metric.WithDescription("API request latency, long-polls included"))
	_, _ = meter.Int64ObservableGauge("lockxd.held", metric.WithDescription("holds granted through this server and not yet released or expired"),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			now := time.Now()
			for _, name := range sortedNames(a.tenants) {
				o.Observe(int64(a.tenants[name].heldCount(now)), metric.WithAttributes(attribute.String("tenant", name)))
			}
			return nil
		}))
}

func newMetrics() *metrics {
	return &metrics{requests: map[[4]string]uint64{}, seconds: map[[3]string]float64{}}
}

func (m *metrics) observe(tenant, k, op string, status int, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests[[4]string{tenant, k, op, strconv.Itoa(status)}]++
	m.seconds[[3]string{tenant, k, op}] += d.Seconds()
	if m.otelRequests != nil {
		ctx := context.Background()
		attrs := metric.WithAttributes(attribute.String("tenant", tenant), attribute.String("kind", k), attribute.String("op", op))
		m.otelRequests.Add(ctx, 1, attrs, metric.WithAttributes(attribute.Int("status", status)))
		m.otelDuration.Record(ctx, d.Seconds(), attrs)
	}
}

func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	m := s.metrics
	m.mu.Lock()
	defer m.mu.Unlock()
	fmt.Fprintln(w, "# HELP lockxd_requests_total API requests by tenant, kind, operation and HTTP status.")
	fmt.Fprintln(w, "# TYPE lockxd_requests_total counter")
	for _, k := range sortedKeys4(m.requests) {
		fmt.Fprintf(w, "lockxd_requests_total{tenant=%q,kind=%q,op=%q,status=%q} %d\n", k[0], k[1], k[2], k[3], m.requests[k])
	}
	fmt.Fprintln(w, "# HELP lockxd_request_seconds_total Time spent serving API requests (including long-polls).")
	fmt.Fprintln(w, "# TYPE lockxd_request_seconds_total counter")
	for _, k := range sortedKeys3(m.seconds) {
		fmt.Fprintf(w, "lockxd_request_seconds_total{tenant=%q,kind=%q,op=%q} %g\n", k[0], k[1], k[2], m.seconds[k])
	}
	fmt.Fprintln(w, "# HELP lockxd_held Holds granted through this server and not yet released or expired, by tenant.")
	fmt.Fprintln(w, "# TYPE lockxd_held gauge")
	now := time.Now()
	for _, name := range sortedNames(s.auth.tenants) {
		fmt.Fprintf(w, "lockxd_held{tenant=%q} %d\n", name, s.auth.tenants[name].heldCount(now))
	}
}
