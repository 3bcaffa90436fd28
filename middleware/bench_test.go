package middleware_test

import (
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/middleware"
	"github.com/lockx-go/lockx/middleware/internal/fencetest"
)

// BenchmarkFencing measures the cost of the fencing check on writes: the
// same handler unchecked and behind Fencing with each store, called in
// process (the middleware's own cost) and over loopback HTTP with 64
// concurrent connections (what a service sees). Every request presents a
// new, higher token for its client's resource, so each check also records.
//
//	go test -run '^$' -bench Fencing -benchtime 3s ./middleware/
func BenchmarkFencing(b *testing.B) {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	for _, st := range []struct {
		name  string
		store func(b *testing.B) lockx.FenceStore
	}{
		{"unchecked", nil},
		{"memlock", func(*testing.B) lockx.FenceStore { return memlock.NewFenceStore() }},
		{"redis", func(b *testing.B) lockx.FenceStore { return fencetest.RedisBackend(b) }},
	} {
		wrap := func(b *testing.B) http.Handler {
			if st.store == nil {
				return handler
			}
			return middleware.Fencing(st.store(b))(handler)
		}
		b.Run(st.name+"/inproc", func(b *testing.B) { benchInProcess(b, wrap(b)) })
		b.Run(st.name+"/http64", func(b *testing.B) { benchHTTP(b, wrap(b)) })
	}
}

// client numbers the benchmark's concurrent clients: each fences its own
// resource with its own rising tokens.
var client atomic.Int64

func benchInProcess(b *testing.B, h http.Handler) {
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		key := "bench/" + strconv.FormatInt(client.Add(1), 10)
		var tok lockx.Token
		for pb.Next() {
			tok++
			req := httptest.NewRequest("PUT", "/docs/1", nil)
			req.Header.Set("Lock-Key", key)
			req.Header.Set("Fencing-Token", tok.String())
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusNoContent {
				b.Errorf("status %d: %s", rec.Code, rec.Body)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}

func benchHTTP(b *testing.B, h http.Handler) {
	srv := httptest.NewServer(h)
	defer srv.Close()
	tr := &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: 64}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	b.SetParallelism((64 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		key := "bench/" + strconv.FormatInt(client.Add(1), 10)
		var tok lockx.Token
		for pb.Next() {
			tok++
			req, _ := http.NewRequest("PUT", srv.URL+"/docs/1", http.NoBody)
			req.Header.Set("Lock-Key", key)
			req.Header.Set("Fencing-Token", tok.String())
			resp, err := c.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusNoContent {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}
