package lockxd

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// Scope is the OTel instrumentation scope of lockxd's metrics.
const Scope = "github.com/lockx-go/lockx/cmd/lockxd"

// durationBuckets are the bounds of lockxd.request.duration (seconds):
// from a loopback try-acquire to a minute-long long-poll.
var durationBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// metrics are lockxd's OTel instruments, per tenant, on a MeterProvider of
// the server's own. One ManualReader feeds GET /metrics (Prometheus text);
// Config.Readers, if any, export the same instruments elsewhere.
type metrics struct {
	mp       *sdkmetric.MeterProvider
	scrape   *sdkmetric.ManualReader
	requests metric.Int64Counter
	duration metric.Float64Histogram
}

func newMetrics(a *authenticator, readers []sdkmetric.Reader) *metrics {
	m := &metrics{scrape: sdkmetric.NewManualReader()}
	opts := []sdkmetric.Option{sdkmetric.WithReader(m.scrape)}
	for _, r := range readers {
		opts = append(opts, sdkmetric.WithReader(r))
	}
	m.mp = sdkmetric.NewMeterProvider(opts...)
	meter := m.mp.Meter(Scope)
	// The SDK's instruments cannot fail with these static names and options.
	m.requests, _ = meter.Int64Counter("lockxd.requests", metric.WithDescription("API requests by tenant, kind, operation and HTTP status"))
	m.duration, _ = meter.Float64Histogram("lockxd.request.duration", metric.WithUnit("s"),
		metric.WithDescription("API request latency by tenant, kind and operation, long-polls and watch streams included"),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	perTenant := func(f func(t *tenant, now time.Time) int64) metric.Int64Callback {
		return func(_ context.Context, o metric.Int64Observer) error {
			now := time.Now()
			for _, name := range sortedNames(a.tenants) {
				o.Observe(f(a.tenants[name], now), metric.WithAttributes(attribute.String("tenant", name)))
			}
			return nil
		}
	}
	_, _ = meter.Int64ObservableGauge("lockxd.held", metric.WithDescription("holds granted through this server and not yet released or expired, by tenant"),
		metric.WithInt64Callback(perTenant(func(t *tenant, now time.Time) int64 { return int64(t.heldCount(now)) })))
	_, _ = meter.Int64ObservableGauge("lockxd.waiting", metric.WithDescription("long-polls and watch streams open now, by tenant"),
		metric.WithInt64Callback(perTenant(func(t *tenant, _ time.Time) int64 { return int64(t.waitCount()) })))
	return m
}

func (m *metrics) observe(tenant, k, op string, status int, d time.Duration) {
	ctx := context.Background()
	attrs := metric.WithAttributes(attribute.String("tenant", tenant), attribute.String("kind", k), attribute.String("op", op))
	m.requests.Add(ctx, 1, attrs, metric.WithAttributes(attribute.Int("status", status)))
	m.duration.Record(ctx, d.Seconds(), attrs)
}

// serveMetrics serves GET /metrics on the API: it needs an API key, and
// shows only the caller's tenant. The page for all tenants is
// MetricsHandler, for a listener of its own (lockxd --metrics-listen):
// tenant names and their activity are not for every client to read.
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	t, herr := s.authenticate(r)
	if herr != nil {
		writeProblem(w, herr)
		return
	}
	s.renderMetrics(w, r, func(a attribute.Set) bool {
		v, ok := a.Value("tenant")
		return ok && v.AsString() == t.name
	})
}

// MetricsHandler returns the Prometheus page of every tenant's metrics,
// without authentication: serve it on a listener that only the scraper
// reaches (lockxd --metrics-listen), never on the API's.
func (s *Server) MetricsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET")
			writeProblem(w, &httpError{status: http.StatusMethodNotAllowed, code: "method-not-allowed", title: "method not allowed", detail: "use GET"})
			return
		}
		s.renderMetrics(w, r, func(attribute.Set) bool { return true })
	})
}

// renderMetrics renders the OTel SDK's collection in the Prometheus text
// format (0.0.4), the points keep accepts: lockxd exports its OTel metrics
// itself rather than pull the Prometheus client library into the module
// (docs/lockxd.md).
func (s *Server) renderMetrics(w http.ResponseWriter, r *http.Request, keep func(attribute.Set) bool) {
	var rm metricdata.ResourceMetrics
	if err := s.metrics.scrape.Collect(r.Context(), &rm); err != nil {
		writeProblem(w, &httpError{status: http.StatusServiceUnavailable, code: "unavailable", title: "metrics unavailable", detail: err.Error()})
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	writeProm(w, rm, keep)
}

// writeProm writes the points of rm that keep accepts in the Prometheus
// text format: dots become underscores, counters get _total, seconds get
// _seconds.
func writeProm(w io.Writer, rm metricdata.ResourceMetrics, keep func(attribute.Set) bool) {
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			name := strings.ReplaceAll(m.Name, ".", "_")
			if m.Unit == "s" {
				name = strings.TrimSuffix(name, "_duration") + "_duration_seconds"
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				header(w, name+"_total", m.Description, "counter")
				points(w, name+"_total", d.DataPoints, keep)
			case metricdata.Gauge[int64]:
				header(w, name, m.Description, "gauge")
				points(w, name, d.DataPoints, keep)
			case metricdata.Histogram[float64]:
				header(w, name, m.Description, "histogram")
				for _, p := range sortedPoints(d.DataPoints, func(p metricdata.HistogramDataPoint[float64]) attribute.Set { return p.Attributes }) {
					if !keep(p.Attributes) {
						continue
					}
					ls := labels(p.Attributes)
					var cum uint64
					for i, b := range p.Bounds {
						cum += p.BucketCounts[i]
						fmt.Fprintf(w, "%s_bucket%s %d\n", name, withLabel(ls, "le", fmt.Sprint(b)), cum)
					}
					fmt.Fprintf(w, "%s_bucket%s %d\n", name, withLabel(ls, "le", "+Inf"), p.Count)
					fmt.Fprintf(w, "%s_sum%s %g\n%s_count%s %d\n", name, ls, p.Sum, name, ls, p.Count)
				}
			}
		}
	}
}

func header(w io.Writer, name, help, typ string) {
	fmt.Fprintf(w, "# HELP %s %s.\n# TYPE %s %s\n", name, help, name, typ)
}

func points(w io.Writer, name string, ps []metricdata.DataPoint[int64], keep func(attribute.Set) bool) {
	for _, p := range sortedPoints(ps, func(p metricdata.DataPoint[int64]) attribute.Set { return p.Attributes }) {
		if !keep(p.Attributes) {
			continue
		}
		fmt.Fprintf(w, "%s%s %d\n", name, labels(p.Attributes), p.Value)
	}
}

// sortedPoints orders data points by their labels, for a stable page.
func sortedPoints[P any](ps []P, attrs func(P) attribute.Set) []P {
	out := slices.Clone(ps)
	slices.SortFunc(out, func(a, b P) int { return strings.Compare(labels(attrs(a)), labels(attrs(b))) })
	return out
}

// labels renders an attribute set as {k="v",…} (keys come sorted).
func labels(s attribute.Set) string {
	if s.Len() == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteByte('{')
	for i, kv := range s.ToSlice() {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", kv.Key, kv.Value.String())
	}
	b.WriteByte('}')
	return b.String()
}

func withLabel(ls, k, v string) string {
	if ls == "" {
		return fmt.Sprintf("{%s=%q}", k, v)
	}
	return fmt.Sprintf("%s,%s=%q}", strings.TrimSuffix(ls, "}"), k, v)
}
