package middleware_test

import (
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
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
		store func(b *testing.B) driver.FenceStore
	}{
		{"unchecked", nil},
		{"memlock", func(*testing.B) driver.FenceStore { return memlock.NewFenceStore() }},
		{"redis", func(b *testing.B) driver.FenceStore { return fencetest.RedisBackend(b) }},
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

// BenchmarkFencingRatio runs the unchecked handler, the checked one and
// the checked one that also verifies token signatures
// (WithTokenVerification) in alternating rounds on one server and one
// connection pool (64 concurrent connections), so that load from elsewhere
// on the machine falls on all alike, and reports each one's throughput,
// checked/unchecked (ratio, target ≥ 0.7) and signed/checked
// (signed-ratio, target ≥ 0.9). Every request carries a signature, made by
// the client, so the variants differ only in what the server does.
//
//	go test -run '^$' -bench FencingRatio -benchtime 20000x ./middleware/
func BenchmarkFencingRatio(b *testing.B) {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	signer, err := lockx.NewTokenSigner(signingKey)
	if err != nil {
		b.Fatal(err)
	}
	for _, st := range []struct {
		name  string
		store func(b *testing.B) driver.FenceStore
	}{
		{"memlock", func(*testing.B) driver.FenceStore { return memlock.NewFenceStore() }},
		{"redis", func(b *testing.B) driver.FenceStore { return fencetest.RedisBackend(b) }},
	} {
		b.Run(st.name, func(b *testing.B) {
			store := st.store(b)
			variants := [3]http.Handler{handler, middleware.Fencing(store)(handler),
				middleware.Fencing(store, middleware.WithTokenVerification(signingKey))(handler)}
			var cur atomic.Pointer[http.Handler]
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*cur.Load()).ServeHTTP(w, r) }))
			defer srv.Close()
			tr := &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: 64}
			defer tr.CloseIdleConnections()
			c := &http.Client{Transport: tr}
			const conns, rounds = 64, 10
			base := client.Add(conns)
			var tokens [conns]lockx.Token
			var elapsed [3]time.Duration
			per := b.N/rounds + 1
			b.ResetTimer()
			for round := 0; round < rounds; round++ {
				for i := 0; i < 3; i++ {
					v := (round + i) % 3 // rotate which variant goes first
					cur.Store(&variants[v])
					elapsed[v] += loadRound(b, c, srv.URL, base, tokens[:], per, signer)
				}
			}
			n := float64(per * rounds)
			unchecked, checked, signed := n/elapsed[0].Seconds(), n/elapsed[1].Seconds(), n/elapsed[2].Seconds()
			b.ReportMetric(unchecked, "unchecked-req/s")
			b.ReportMetric(checked, "checked-req/s")
			b.ReportMetric(signed, "signed-req/s")
			b.ReportMetric(checked/unchecked, "ratio")
			b.ReportMetric(signed/checked, "signed-ratio")
		})
	}
}

// loadRound sends n PUTs over len(tokens) concurrent connections, each
// client with its own resource and rising tokens, each signed by signer
// if it is not nil, and returns the time taken.
func loadRound(b *testing.B, c *http.Client, url string, base int64, tokens []lockx.Token, n int, signer *lockx.TokenSigner) time.Duration {
	var left atomic.Int64
	left.Store(int64(n))
	var wg sync.WaitGroup
	start := time.Now()
	for g := range tokens {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := "bench/" + strconv.FormatInt(base+int64(g), 10)
			for left.Add(-1) >= 0 {
				tokens[g]++
				req, _ := http.NewRequest("PUT", url, http.NoBody)
				req.Header.Set("Lock-Key", key)
				req.Header.Set("Fencing-Token", tokens[g].String())
				if signer != nil {
					req.Header.Set(middleware.HeaderTokenSignature, signer.Sign(key, tokens[g]))
				}
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
		}()
	}
	wg.Wait()
	return time.Since(start)
}
