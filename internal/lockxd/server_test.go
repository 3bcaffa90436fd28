package lockxd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/lockx/pglock"
	"github.com/lockx-go/lockx/lockx/redislock"
)

func TestMain(m *testing.M) { testenv.Main(m) }

type backendCase struct {
	name string
	new  func(t *testing.T) driver.Backend
}

func backends() []backendCase {
	return []backendCase{
		{"memlock", func(t *testing.T) driver.Backend { return memlock.New() }},
		{"redis", func(t *testing.T) driver.Backend {
			rdb := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t)})
			prefix := fmt.Sprintf("lockxd-test:%s:%d:", t.Name(), time.Now().UnixNano())
			b := redislock.New(rdb, redislock.WithPrefix(prefix))
			t.Cleanup(func() { _ = b.Close(); _ = rdb.Close() })
			return b
		}},
		{"postgres", func(t *testing.T) driver.Backend {
			pool, err := pgxpool.New(context.Background(), testenv.PostgresURL(t))
			if err != nil {
				t.Fatal(err)
			}
			b := pglock.New(pool, pglock.WithNamespace(fmt.Sprintf("lockxd-test-%d", time.Now().UnixNano())))
			t.Cleanup(func() { _ = b.Close(); pool.Close() })
			return b
		}},
	}
}

func tenants() []TenantConfig {
	return []TenantConfig{
		{Tenant: "a", SHA256: HashKey("key-a")},
		{Tenant: "a", SHA256: HashKey("key-a2")}, // a second client of tenant a
		{Tenant: "b", SHA256: HashKey("key-b")},
		{Tenant: "q", SHA256: HashKey("key-q"), MaxHeld: 2, MaxWaiters: 1},
		{Tenant: "r", SHA256: HashKey("key-r"), Rate: 1, Burst: 3},
	}
}

func start(t *testing.T, b driver.Backend) *httptest.Server {
	srv := NewServer(b, Config{Tenants: tenants(), MaxWait: 10 * time.Second})
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return ts
}

type reply struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func call(t *testing.T, ts *httptest.Server, apiKey, method, path, body string) reply {
	t.Helper()
	req, err := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	r := reply{status: res.StatusCode, header: res.Header, raw: string(raw)}
	_ = json.Unmarshal(raw, &r.body)
	if res.StatusCode >= 400 && res.Header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("%s %s: status %d with Content-Type %q, want problem+json", method, path, res.StatusCode, res.Header.Get("Content-Type"))
	}
	if res.StatusCode >= 500 && res.StatusCode != 503 && res.StatusCode != 501 {
		t.Errorf("%s %s: status %d: %s", method, path, res.StatusCode, raw)
	}
	return r
}

func token(t *testing.T, r reply) uint64 {
	t.Helper()
	s, _ := r.body["token"].(string)
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 {
		t.Fatalf("no token in %s", r.raw)
	}
	return n
}

func TestAPI(t *testing.T) {
	for _, bc := range backends() {
		t.Run(bc.name, func(t *testing.T) {
			t.Run("contention", func(t *testing.T) { testContention(t, start(t, bc.new(t))) })
			t.Run("long-poll", func(t *testing.T) { testLongPoll(t, start(t, bc.new(t))) })
			t.Run("tenants", func(t *testing.T) { testTenants(t, start(t, bc.new(t))) })
			t.Run("quota", func(t *testing.T) { testQuota(t, start(t, bc.new(t))) })
			t.Run("lease-expiry", func(t *testing.T) { testLeaseExpiry(t, start(t, bc.new(t))) })
			t.Run("restart", func(t *testing.T) { testRestart(t, bc.new(t)) })
			t.Run("rwlock", func(t *testing.T) { testRW(t, start(t, bc.new(t))) })
			t.Run("semaphore", func(t *testing.T) { testSemaphore(t, start(t, bc.new(t))) })
		})
	}
}

// Two clients contend through the API: never both inside, tokens increase.
func testContention(t *testing.T, ts *httptest.Server) {
	var inside atomic.Int32
	var mu sync.Mutex
	var last uint64
	var wg sync.WaitGroup
	for c := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 15 {
				r := call(t, ts, "key-a", "POST", "/v1/locks/acquire", `{"key":"hot","lease_ms":5000,"wait_ms":5000}`)
				if r.status != 200 {
					t.Errorf("client %d: acquire: %d %s", c, r.status, r.raw)
					return
				}
				if inside.Add(1) != 1 {
					t.Errorf("two clients inside")
				}
				tok := token(t, r)
				mu.Lock()
				if tok <= last {
					t.Errorf("token %d after %d", tok, last)
				}
				last = tok
				mu.Unlock()
				inside.Add(-1)
				rr := call(t, ts, "key-a", "POST", "/v1/locks/release", fmt.Sprintf(`{"key":"hot","owner":%q}`, r.body["owner"]))
				if rr.status != 200 {
					t.Errorf("release: %d %s", rr.status, rr.raw)
				}
			}
		}()
	}
	wg.Wait()
	// Try-acquire on a held key: 409 with Retry-After.
	r := call(t, ts, "key-a", "POST", "/v1/locks/try-acquire", `{"key":"k","lease_ms":5000}`)
	r2 := call(t, ts, "key-a", "POST", "/v1/locks/try-acquire", `{"key":"k","lease_ms":5000}`)
	if r.status != 200 || r2.status != 409 || r2.header.Get("Retry-After") == "" {
		t.Fatalf("try-acquire: %d, then %d (Retry-After %q)", r.status, r2.status, r2.header.Get("Retry-After"))
	}
	// Idempotent re-acquire by the same owner returns the same token.
	r3 := call(t, ts, "key-a", "POST", "/v1/locks/try-acquire", fmt.Sprintf(`{"key":"k","lease_ms":5000,"owner":%q}`, r.body["owner"]))
	if r3.status != 200 || token(t, r3) != token(t, r) {
		t.Fatalf("re-acquire: %d %s", r3.status, r3.raw)
	}
	// Inspect shows it, without the namespace.
	in := call(t, ts, "key-a", "GET", "/v1/locks?key=k", "")
	if in.status != 200 || in.body["key"] != "k" || in.body["holder"] != r.body["holder"] || in.body["owner"] != nil {
		t.Fatalf("inspect: %d %s", in.status, in.raw)
	}
	// Release by a wrong owner: 404, lock stays.
	if r := call(t, ts, "key-a", "POST", "/v1/locks/release", `{"key":"k","owner":"nobody"}`); r.status != 404 {
		t.Fatalf("release by stranger: %d", r.status)
	}
}

func testLongPoll(t *testing.T, ts *httptest.Server) {
	r := call(t, ts, "key-a", "POST", "/v1/locks/acquire", `{"key":"lp","lease_ms":30000}`)
	if r.status != 200 {
		t.Fatalf("acquire: %d %s", r.status, r.raw)
	}
	done := make(chan reply, 1)
	startWait := time.Now()
	go func() {
		done <- call(t, ts, "key-a", "POST", "/v1/locks/acquire", `{"key":"lp","lease_ms":30000,"wait_ms":8000}`)
	}()
	time.Sleep(200 * time.Millisecond)
	call(t, ts, "key-a", "POST", "/v1/locks/release", fmt.Sprintf(`{"key":"lp","owner":%q}`, r.body["owner"]))
	w := <-done
	if w.status != 200 || token(t, w) <= token(t, r) {
		t.Fatalf("waiter: %d %s", w.status, w.raw)
	}
	if d := time.Since(startWait); d > 3*time.Second {
		t.Fatalf("waiter woke after %v, long after the release", d)
	}
	// A long-poll that times out is a 409 after about wait_ms.
	t0 := time.Now()
	x := call(t, ts, "key-a", "POST", "/v1/locks/acquire", `{"key":"lp","lease_ms":30000,"wait_ms":300,"fair":true}`)
	if x.status != 409 || time.Since(t0) < 250*time.Millisecond || x.header.Get("Retry-After") == "" {
		t.Fatalf("timed-out long-poll: %d after %v", x.status, time.Since(t0))
	}
}

func testTenants(t *testing.T, ts *httptest.Server) {
	a := call(t, ts, "key-a", "POST", "/v1/locks/try-acquire", `{"key":"shared","lease_ms":30000}`)
	if a.status != 200 {
		t.Fatalf("a: %d", a.status)
	}
	// B's "shared" is another lock: granted.
	b := call(t, ts, "key-b", "POST", "/v1/locks/try-acquire", `{"key":"shared","lease_ms":30000}`)
	if b.status != 200 {
		t.Fatalf("b: %d %s", b.status, b.raw)
	}
	owner := a.body["owner"]
	// B holding A's owner id still cannot release, extend or see A's lock.
	for _, p := range []string{"/v1/locks/release", "/v1/locks/extend"} {
		body := fmt.Sprintf(`{"key":"shared","owner":%q}`, owner)
		if strings.HasSuffix(p, "extend") {
			body = fmt.Sprintf(`{"key":"shared","owner":%q,"lease_ms":1000}`, owner)
		}
		if r := call(t, ts, "key-b", "POST", p, body); r.status != 404 {
			t.Fatalf("b %s of a's lock: %d %s", p, r.status, r.raw)
		}
	}
	for _, key := range []string{"../a/shared", "lockxd/a/shared", "/a/shared"} {
		if r := call(t, ts, "key-b", "POST", "/v1/locks/release", fmt.Sprintf(`{"key":%q,"owner":%q}`, key, owner)); r.status != 404 {
			t.Fatalf("b releasing %q: %d", key, r.status)
		}
	}
	l := call(t, ts, "key-b", "GET", "/v1/locks", "")
	locks, _ := l.body["locks"].([]any)
	if l.status != 200 || len(locks) != 1 || locks[0].(map[string]any)["holder"] != b.body["holder"] {
		t.Fatalf("b's listing: %s", l.raw)
	}
	if r := call(t, ts, "key-a", "POST", "/v1/locks/extend", fmt.Sprintf(`{"key":"shared","owner":%q,"lease_ms":30000}`, owner)); r.status != 200 {
		t.Fatalf("a's lock after b's attempts: %d", r.status)
	}
	// Auth failures.
	for _, k := range []string{"", "wrong", "KEY-A"} {
		if r := call(t, ts, k, "POST", "/v1/locks/try-acquire", `{"key":"x","lease_ms":1000}`); r.status != 401 {
			t.Fatalf("key %q: %d", k, r.status)
		}
	}
	req, _ := http.NewRequest("GET", ts.URL+"/v1/locks", nil)
	req.Header.Set("Authorization", "Basic a2V5LWE6")
	if res, _ := ts.Client().Do(req); res.StatusCode != 401 {
		t.Fatalf("basic auth: %d", res.StatusCode)
	} else {
		res.Body.Close()
	}
	req.Header.Del("Authorization")
	req.Header.Set("X-API-Key", "key-a")
	if res, _ := ts.Client().Do(req); res.StatusCode != 200 {
		t.Fatalf("X-API-Key: %d", res.StatusCode)
	} else {
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
}

func testQuota(t *testing.T, ts *httptest.Server) {
	var owners []any
	for i := range 2 {
		r := call(t, ts, "key-q", "POST", "/v1/locks/try-acquire", fmt.Sprintf(`{"key":"q%d","lease_ms":30000}`, i))
		if r.status != 200 {
			t.Fatalf("q%d: %d", i, r.status)
		}
		owners = append(owners, r.body["owner"])
	}
	r := call(t, ts, "key-q", "POST", "/v1/locks/try-acquire", `{"key":"q2","lease_ms":30000}`)
	if r.status != 429 || r.header.Get("Retry-After") == "" {
		t.Fatalf("third lock: %d %q", r.status, r.header.Get("Retry-After"))
	}
	// Another tenant is not affected.
	if r := call(t, ts, "key-a", "POST", "/v1/locks/try-acquire", `{"key":"q2","lease_ms":30000}`); r.status != 200 {
		t.Fatalf("tenant a: %d", r.status)
	}
	call(t, ts, "key-q", "POST", "/v1/locks/release", fmt.Sprintf(`{"key":"q0","owner":%q}`, owners[0]))
	if r := call(t, ts, "key-q", "POST", "/v1/locks/try-acquire", `{"key":"q2","lease_ms":30000}`); r.status != 200 {
		t.Fatalf("after release: %d", r.status)
	}
	// Rate limit: burst 3 at 1/s.
	got429 := false
	for range 5 {
		r := call(t, ts, "key-r", "GET", "/v1/locks", "")
		if r.status == 429 {
			got429 = r.header.Get("Retry-After") != ""
			break
		}
	}
	if !got429 {
		t.Fatal("no 429 with Retry-After from the rate limit")
	}
}

func testLeaseExpiry(t *testing.T, ts *httptest.Server) {
	// A client takes the lock and vanishes: no keep-alives.
	r := call(t, ts, "key-a", "POST", "/v1/locks/try-acquire", `{"key":"gone","lease_ms":300}`)
	if r.status != 200 {
		t.Fatalf("acquire: %d", r.status)
	}
	t0 := time.Now()
	w := call(t, ts, "key-a", "POST", "/v1/locks/acquire", `{"key":"gone","lease_ms":5000,"wait_ms":5000}`)
	if w.status != 200 || token(t, w) <= token(t, r) {
		t.Fatalf("after abandonment: %d %s", w.status, w.raw)
	}
	if d := time.Since(t0); d > 3*time.Second {
		t.Fatalf("took %v", d)
	}
	if x := call(t, ts, "key-a", "POST", "/v1/locks/extend", fmt.Sprintf(`{"key":"gone","owner":%q,"lease_ms":1000}`, r.body["owner"])); x.status != 404 {
		t.Fatalf("extend by the vanished client: %d", x.status)
	}
	// A kept-alive lock outlives its lease (extended at a third of it,
	// which leaves a loaded machine room).
	k := call(t, ts, "key-a", "POST", "/v1/locks/try-acquire", `{"key":"kept","lease_ms":900}`)
	for range 5 {
		time.Sleep(300 * time.Millisecond)
		if x := call(t, ts, "key-a", "POST", "/v1/locks/extend", fmt.Sprintf(`{"key":"kept","owner":%q,"lease_ms":900}`, k.body["owner"])); x.status != 200 {
			t.Fatalf("keep-alive: %d %s", x.status, x.raw)
		}
	}
}

// State lives in the backend: a new server over it sees the lock.
func testRestart(t *testing.T, b driver.Backend) {
	ts1 := start(t, b)
	r := call(t, ts1, "key-a", "POST", "/v1/locks/try-acquire", `{"key":"r","lease_ms":30000}`)
	ts1.Close()
	ts2 := start(t, b)
	if x := call(t, ts2, "key-a", "POST", "/v1/locks/try-acquire", `{"key":"r","lease_ms":30000}`); x.status != 409 {
		t.Fatalf("after restart: %d", x.status)
	}
	if x := call(t, ts2, "key-a", "POST", "/v1/locks/release", fmt.Sprintf(`{"key":"r","owner":%q}`, r.body["owner"])); x.status != 200 {
		t.Fatalf("release after restart: %d", x.status)
	}
}

func testRW(t *testing.T, ts *httptest.Server) {
	r1 := call(t, ts, "key-a", "POST", "/v1/rwlocks/try-acquire", `{"key":"doc","mode":"read","lease_ms":30000}`)
	r2 := call(t, ts, "key-a", "POST", "/v1/rwlocks/try-acquire", `{"key":"doc","mode":"read","lease_ms":30000}`)
	w := call(t, ts, "key-a", "POST", "/v1/rwlocks/try-acquire", `{"key":"doc","mode":"write","lease_ms":30000}`)
	if r1.status != 200 || r2.status != 200 || w.status != 409 {
		t.Fatalf("read, read, write: %d %d %d", r1.status, r2.status, w.status)
	}
	for _, r := range []reply{r1, r2} {
		call(t, ts, "key-a", "POST", "/v1/rwlocks/release", fmt.Sprintf(`{"key":"doc","mode":"read","owner":%q}`, r.body["owner"]))
	}
	w = call(t, ts, "key-a", "POST", "/v1/rwlocks/acquire", `{"key":"doc","mode":"write","lease_ms":30000,"wait_ms":2000}`)
	if w.status != 200 || token(t, w) < token(t, r1) {
		t.Fatalf("write: %d %s", w.status, w.raw)
	}
}

func testSemaphore(t *testing.T, ts *httptest.Server) {
	var owners []any
	for i := range 2 {
		r := call(t, ts, "key-a", "POST", "/v1/semaphores/try-acquire", `{"key":"pool","limit":2,"lease_ms":30000}`)
		if r.status != 200 {
			t.Fatalf("permit %d: %d %s", i, r.status, r.raw)
		}
		owners = append(owners, r.body["owner"])
	}
	if r := call(t, ts, "key-a", "POST", "/v1/semaphores/try-acquire", `{"key":"pool","limit":2,"lease_ms":30000}`); r.status != 409 {
		t.Fatalf("third permit: %d", r.status)
	}
	u := call(t, ts, "key-a", "GET", "/v1/semaphores/usage?key=pool", "")
	if u.body["in_use"] != float64(2) {
		t.Fatalf("usage: %s", u.raw)
	}
	call(t, ts, "key-a", "POST", "/v1/semaphores/release", fmt.Sprintf(`{"key":"pool","owner":%q}`, owners[0]))
	if r := call(t, ts, "key-a", "POST", "/v1/semaphores/acquire", `{"key":"pool","limit":2,"lease_ms":30000,"wait_ms":1000}`); r.status != 200 {
		t.Fatalf("after release: %d", r.status)
	}
}

func TestBadInput(t *testing.T) {
	ts := start(t, memlock.New())
	huge := `{"key":"` + strings.Repeat("x", 600) + `","lease_ms":1000}`
	for _, c := range []struct {
		path, body string
		want       int
	}{
		{"/v1/locks/try-acquire", `{"key":"","lease_ms":1000}`, 400},
		{"/v1/locks/try-acquire", huge, 400},
		{"/v1/locks/try-acquire", `{"key":"` + strings.Repeat("x", 20000) + `"}`, 413},
		{"/v1/locks/try-acquire", `{"key":"k"}`, 400},
		{"/v1/locks/try-acquire", `{"key":"k","lease_ms":-5}`, 400},
		{"/v1/locks/try-acquire", `{"key":"k","lease_ms":99999999999}`, 400},
		{"/v1/locks/try-acquire", `{"key":"k","lease_ms":"10"}`, 400},
		{"/v1/locks/try-acquire", `{"key":"k","lease_ms":1000,"wait_ms":10}`, 400},
		{"/v1/locks/acquire", `{"key":"k","lease_ms":1000,"wait_ms":-1}`, 400},
		{"/v1/locks/try-acquire", `{"key":"k","lease_ms":1000,"bogus":1}`, 400},
		{"/v1/locks/try-acquire", `{"key":"k","lease_ms":1000`, 400},
		{"/v1/locks/try-acquire", `{"key":"k","lease_ms":1000}{}`, 400},
		{"/v1/locks/try-acquire", ``, 400},
		{"/v1/locks/try-acquire", `[]`, 400},
		{"/v1/locks/try-acquire", `{"key":"a\u0000b","lease_ms":1000}`, 400},
		{"/v1/locks/try-acquire", `{"key":"k","lease_ms":1000,"mode":"read"}`, 400},
		{"/v1/locks/release", `{"key":"k"}`, 400},
		{"/v1/locks/release", `{"key":"k","owner":"o","lease_ms":5}`, 400},
		{"/v1/locks/extend", `{"key":"k","owner":"o"}`, 400},
		{"/v1/rwlocks/try-acquire", `{"key":"k","lease_ms":1000,"mode":"both"}`, 400},
		{"/v1/semaphores/try-acquire", `{"key":"k","lease_ms":1000,"limit":2,"count":3}`, 400},
		{"/v1/semaphores/try-acquire", `{"key":"k","lease_ms":1000}`, 400},
	} {
		if r := call(t, ts, "key-a", "POST", c.path, c.body); r.status != c.want {
			t.Errorf("%s %.60s: %d, want %d (%s)", c.path, c.body, r.status, c.want, r.raw)
		}
	}
}

func TestServiceEndpoints(t *testing.T) {
	ts := start(t, memlock.New())
	if r := call(t, ts, "", "GET", "/healthz", ""); r.status != 200 {
		t.Fatalf("healthz: %d", r.status)
	}
	call(t, ts, "key-a", "POST", "/v1/locks/try-acquire", `{"key":"m","lease_ms":30000}`)
	m := call(t, ts, "key-a", "GET", "/metrics", "")
	for _, want := range []string{`lockxd_requests_total{kind="locks",op="try-acquire",status="200",tenant="a"} 1`, `lockxd_held{tenant="a"} 1`,
		`# TYPE lockxd_request_duration_seconds histogram`, `lockxd_request_duration_seconds_bucket{kind="locks",op="try-acquire",tenant="a",le="+Inf"} 1`,
		`lockxd_request_duration_seconds_count{kind="locks",op="try-acquire",tenant="a"} 1`, `lockxd_waiting{tenant="a"} 0`} {
		if !strings.Contains(m.raw, want) {
			t.Errorf("metrics lack %s:\n%s", want, m.raw)
		}
	}
	o := call(t, ts, "", "GET", "/openapi.yaml", "")
	docs, err := os.ReadFile("../../docs/openapi/lockxd.yaml")
	if err != nil || o.raw != string(docs) {
		t.Fatalf("served OpenAPI differs from docs/openapi/lockxd.yaml (cp internal/lockxd/openapi.yaml docs/openapi/lockxd.yaml): %v", err)
	}
	// Every route of the server is in the document, with its method.
	srv := NewServer(memlock.New(), Config{})
	for p, m := range srv.routes {
		if !strings.Contains(o.raw, "\n  "+p+":\n    "+strings.ToLower(m)+":") {
			t.Errorf("OpenAPI lacks %s %s", m, p)
		}
	}
}

func TestOTelMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	srv := NewServer(memlock.New(), Config{Tenants: tenants(), Readers: []sdkmetric.Reader{reader}})
	ts := httptest.NewServer(srv)
	defer func() { _ = srv.Close(context.Background()) }()
	defer ts.Close()
	call(t, ts, "key-b", "POST", "/v1/locks/try-acquire", `{"key":"o","lease_ms":30000}`)
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					if v, _ := p.Attributes.Value("tenant"); v.AsString() == "b" && p.Value == 1 {
						found[m.Name] = true
					}
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					if v, _ := p.Attributes.Value("tenant"); v.AsString() == "b" && p.Value == 1 {
						found[m.Name] = true
					}
				}
			case metricdata.Histogram[float64]:
				found[m.Name] = len(d.DataPoints) > 0
			}
		}
	}
	for _, n := range []string{"lockxd.requests", "lockxd.request.duration", "lockxd.held"} {
		if !found[n] {
			t.Errorf("OTel metric %s for tenant b missing: %+v", n, rm)
		}
	}
}

func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{`{"key":"k","lease_ms":1000}`, `{"key":"k","owner":"o","mode":"read"}`, `{`, `{"key":1}`, `{"limit":1e99}`} {
		f.Add([]byte(s))
	}
	s := NewServer(memlock.New(), Config{Tenants: tenants()})
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := decodeRequest(bytes.NewReader(data))
		if err != nil {
			return
		}
		for _, k := range []kind{kindLock, kindRW, kindSem} {
			for _, op := range []string{"acquire", "try-acquire", "release", "extend"} {
				r := req
				if e := s.validate(k, op, &r); e != nil && e.status != 400 {
					t.Fatalf("status %d", e.status)
				}
			}
		}
	})
}

// FuzzServeHTTP sends arbitrary requests through the whole handler: any
// method, path, query and body, with or without a key. Nothing may panic
// or answer 5xx (memlock behind it has every capability and never fails),
// and every error is problem+json.
func FuzzServeHTTP(f *testing.F) {
	for _, c := range []struct {
		method, target, body string
	}{
		{"POST", "/v1/locks/try-acquire", `{"key":"k","lease_ms":1000}`},
		{"POST", "/v1/locks/acquire", `{"key":"k","lease_ms":1000,"wait_ms":5,"fair":true}`},
		{"POST", "/v1/rwlocks/try-acquire", `{"key":"k","lease_ms":1000,"mode":"read","queue":true,"queue_ttl_ms":50}`},
		{"POST", "/v1/semaphores/acquire", `{"key":"k","lease_ms":1000,"limit":3,"count":2,"wait_ms":1}`},
		{"POST", "/v1/locks/extend-many", `{"locks":[{"key":"k","owner":"o","lease_ms":10}]}`},
		{"POST", "/v1/locks/release", `{"key":"k","owner":"o"}`},
		{"POST", "/v1/locks/ttl", `{"key":"k","owner":"o"}`},
		{"POST", "/v1/fence", `{"resource":"r","token":"7"}`},
		{"GET", "/v1/watch?key=k&owner=o", ``},
		{"POST", "/v1/watch/cancel", `{"id":"0123"}`},
		{"POST", "/v1/locks/acquire-many", `{"owner":"o","lease_ms":100,"keys":["a","b"]}`},
		{"GET", "/v1/locks?prefix=", ``},
		{"GET", "/v1/semaphores/usage?key=k", ``},
		{"DELETE", "/v1/locks/release", `{}`},
		{"POST", "/v1/locks/extend", `{"key":"k","owner":"o","lease_ms":1e30}`},
	} {
		f.Add(c.method, c.target, []byte(c.body), true)
	}
	s := NewServer(memlock.New(), Config{Tenants: tenants(), MaxWait: 20 * time.Millisecond, MaxLease: time.Minute})
	f.Fuzz(func(t *testing.T, method, target string, body []byte, auth bool) {
		req, err := http.NewRequest(method, "http://lockxd"+target, bytes.NewReader(body))
		if err != nil || req.URL.Path == "" || req.URL.Path[0] != '/' {
			return
		}
		if auth {
			req.Header.Set("X-API-Key", "key-a")
		}
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %q %q: %d %s", method, target, body, rec.Code, rec.Body)
		}
		if rec.Code >= 400 && rec.Header().Get("Content-Type") != "application/problem+json" {
			t.Fatalf("%s %q: %d as %q", method, target, rec.Code, rec.Header().Get("Content-Type"))
		}
	})
}

// A watch stream ends only at its own tenant's request.
func TestWatchCancelIsPerTenant(t *testing.T) {
	a := newAuthenticator(tenants())
	var ss streams
	id, end := ss.add(a.tenants["a"])
	ss.end(a.tenants["b"], id)
	ss.end(a.tenants["a"], "another")
	select {
	case <-end:
		t.Fatal("another tenant (or another id) ended a's stream")
	default:
	}
	ss.end(a.tenants["a"], id)
	select {
	case <-end:
	default:
		t.Fatal("a could not end its own stream")
	}
	ss.end(a.tenants["a"], id) // twice: no panic
	ss.remove(id)
}
