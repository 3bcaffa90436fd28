package middleware_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/middleware"
	"github.com/lockx-go/lockx/patterns/idempotency"
)

// trivial is the handler of the overhead benchmarks.
var trivial = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write([]byte(`{"id":"ord_1","status":"created"}`))
})

func benchGuard(b *testing.B) lockx.Idempotency {
	locks := lockx.New(memlock.New())
	b.Cleanup(func() { locks.Close() })
	g, err := idempotency.New(locks)
	if err != nil {
		b.Fatal(err)
	}
	return g
}

// benchCases are the paths compared: the bare handler, the middleware on a
// method it does not cover, the replay path (one key, stored) and the first
// request path (a new key every time: lock, run, store, release).
func benchCases(b *testing.B) map[string]struct {
	h   http.Handler
	key func(i int64) string
} {
	mw := middleware.Idempotency(middleware.IdempotencyConfig{Guard: benchGuard(b)})(trivial)
	fixed := func(int64) string { return `"8e03978e-40d5-43e8-bc93-6894a57f9324"` }
	return map[string]struct {
		h   http.Handler
		key func(i int64) string
	}{
		"bare":   {trivial, fixed},
		"replay": {mw, fixed},
		"first":  {mw, func(i int64) string { return `"8e03978e-40d5-43e8-` + strconv.FormatInt(i+1e12, 10) + `"` }},
	}
}

// BenchmarkIdempotencyHTTP measures requests/s over loopback with
// keep-alive clients: what a service sees.
func BenchmarkIdempotencyHTTP(b *testing.B) {
	for _, name := range []string{"bare", "replay", "first"} {
		c := benchCases(b)[name]
		var n atomic.Int64 // across the rounds of b.Run: "first" never repeats a key
		b.Run(name, func(b *testing.B) {
			srv := httptest.NewServer(c.h)
			defer srv.Close()
			tr := &http.Transport{MaxIdleConnsPerHost: 64}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr}
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					req, _ := http.NewRequest("POST", srv.URL+"/orders", strings.NewReader(`{"sku":42,"qty":1}`))
					req.Header.Set("Idempotency-Key", c.key(n.Add(1)))
					req.Header.Set("Authorization", "Bearer sk_test_1")
					res, err := client.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, res.Body)
					res.Body.Close()
					if res.StatusCode != http.StatusCreated {
						b.Errorf("status %d", res.StatusCode)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
		})
	}
}

// nopWriter is a ResponseWriter that keeps nothing, so that the in-process
// benchmark measures the middleware and not a recorder.
type nopWriter struct{ h http.Header }

func (w *nopWriter) Header() http.Header         { return w.h }
func (w *nopWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *nopWriter) WriteHeader(int)             {}

// BenchmarkIdempotencyServe measures the middleware's own cost in process.
func BenchmarkIdempotencyServe(b *testing.B) {
	for _, name := range []string{"bare", "replay", "first"} {
		c := benchCases(b)[name]
		var n atomic.Int64 // across the rounds of b.Run: "first" never repeats a key
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				w := &nopWriter{h: http.Header{}}
				body := strings.NewReader("")
				for pb.Next() {
					body.Reset(`{"sku":42,"qty":1}`)
					req := httptest.NewRequestWithContext(context.Background(), "POST", "/orders", io.NopCloser(body))
					req.Header.Set("Idempotency-Key", c.key(n.Add(1)))
					clear(w.h)
					c.h.ServeHTTP(w, req)
				}
			})
		})
	}
}

// BenchmarkIdempotencyPaired alternates one request to the bare handler and
// one through the middleware's replay path on one keep-alive connection
// each, and reports the throughput ratio replay/bare. Pairing makes the
// ratio robust against load that varies during the run (a shared machine),
// which moves both sides alike.
func BenchmarkIdempotencyPaired(b *testing.B) {
	cases := benchCases(b)
	bare := httptest.NewServer(cases["bare"].h)
	defer bare.Close()
	mw := httptest.NewServer(cases["replay"].h)
	defer mw.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: 4}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	key := cases["replay"].key(0)
	send := func(url string) time.Duration {
		start := time.Now()
		req, _ := http.NewRequest("POST", url+"/orders", strings.NewReader(`{"sku":42,"qty":1}`))
		req.Header.Set("Idempotency-Key", key)
		req.Header.Set("Authorization", "Bearer sk_test_1")
		res, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return time.Since(start)
	}
	send(mw.URL) // store the response
	var tb, tr2 time.Duration
	b.ResetTimer()
	for range b.N {
		tb += send(bare.URL)
		tr2 += send(mw.URL)
	}
	b.ReportMetric(float64(b.N)/tb.Seconds(), "bare-req/s")
	b.ReportMetric(float64(b.N)/tr2.Seconds(), "replay-req/s")
	b.ReportMetric(tb.Seconds()/tr2.Seconds(), "replay/bare")
}
