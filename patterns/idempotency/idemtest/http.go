package idemtest

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/patterns/idempotency"
)

// Limits a server under RunHTTP must configure, and the header naming the
// caller its Principal must read.
const (
	MaxBodyBytes     = 1024
	MaxResponseBytes = 2048
	PrincipalHeader  = "X-Principal"
)

// NewServer wraps app in the Idempotency-Key middleware under test, over
// guard: MaxBodyBytes and MaxResponseBytes as above, the principal read from
// PrincipalHeader, defaults otherwise.
type NewServer func(t *testing.T, guard lockx.Idempotency, app http.Handler) http.Handler

// NewGuards returns n guards that share one lock backend and one result
// store, as n instances of a service do, configured with opts.
type NewGuards func(t *testing.T, n int, opts ...idempotency.Option) []*idempotency.Guard

// App is the handler RunHTTP protects. It counts the requests it really
// processes, per path.
type App struct {
	runs sync.Map // path → *atomic.Int64

	gateOnce sync.Once
	gate     chan struct{} // closed by Open; ?hold=1 requests wait for it
}

// Open lets every request that asked to be held (?hold=1) answer. A test
// holds a request to keep its call in flight for as long as it needs,
// whatever the machine's load, where a sleep would only make that likely.
func (a *App) Open() { close(a.gateCh()) }

func (a *App) gateCh() chan struct{} {
	a.gateOnce.Do(func() { a.gate = make(chan struct{}) })
	return a.gate
}

// Runs returns how many requests to path the handler processed.
func (a *App) Runs(path string) int64 {
	v, _ := a.runs.LoadOrStore(path, new(atomic.Int64))
	return v.(*atomic.Int64).Load()
}

// ServeHTTP answers by path: /fail with 500, /busy with 503, /big with
// ?n= bytes, anything else with 201 and a JSON echo of the request. A ?sleep=
// (milliseconds) delays the answer; ?hold=1 holds it until Open (at most
// 30 s).
func (a *App) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	v, _ := a.runs.LoadOrStore(r.URL.Path, new(atomic.Int64))
	n := v.(*atomic.Int64).Add(1)
	if r.URL.Query().Get("hold") == "1" {
		select {
		case <-a.gateCh():
		case <-time.After(30 * time.Second):
		}
	}
	if ms, _ := strconv.Atoi(r.URL.Query().Get("sleep")); ms > 0 {
		time.Sleep(time.Duration(ms) * time.Millisecond)
	}
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("X-Not-Replayed", "x")
	switch r.URL.Path {
	case "/fail":
		http.Error(w, "boom "+strconv.FormatInt(n, 10), http.StatusInternalServerError)
	case "/busy":
		http.Error(w, "busy", http.StatusServiceUnavailable)
	case "/big":
		size, _ := strconv.Atoi(r.URL.Query().Get("n"))
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write([]byte(strings.Repeat("b", size)))
	default:
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", r.URL.Path+"/"+strconv.FormatInt(n, 10))
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"run": n, "body": string(body), "principal": r.Header.Get(PrincipalHeader)})
	}
}

type harness struct {
	t      *testing.T
	app    *App
	urls   []string
	client *http.Client
}

func start(t *testing.T, newServer NewServer, newGuards NewGuards, n int, opts ...idempotency.Option) *harness {
	t.Helper()
	h := &harness{t: t, app: &App{}}
	tr := &http.Transport{MaxIdleConnsPerHost: 128}
	h.client = &http.Client{Transport: tr, Timeout: 30 * time.Second}
	t.Cleanup(tr.CloseIdleConnections)
	for _, g := range newGuards(t, n, opts...) {
		srv := httptest.NewServer(newServer(t, g, h.app))
		t.Cleanup(srv.Close)
		h.urls = append(h.urls, srv.URL)
	}
	return h
}

type resp struct {
	status int
	header http.Header
	body   string
}

// do sends a request to instance i; key "" sends no Idempotency-Key, keys
// are sent as given (quote them for a well-formed header).
func (h *harness) do(i int, method, path, principal, body string, keys ...string) resp {
	h.t.Helper()
	req, err := http.NewRequest(method, h.urls[i%len(h.urls)]+path, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	for _, k := range keys {
		req.Header.Add("Idempotency-Key", k)
	}
	if principal != "" {
		req.Header.Set(PrincipalHeader, principal)
	}
	res, err := h.client.Do(req)
	if err != nil {
		h.t.Error(err)
		return resp{}
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{res.StatusCode, res.Header, string(b)}
}

func newKey() string { return `"` + rand.Text() + `"` }

func wantProblem(t *testing.T, r resp, status int, kind string) {
	t.Helper()
	if r.status != status || r.header.Get("Content-Type") != "application/problem+json" ||
		!strings.Contains(r.body, "#"+kind+`"`) {
		t.Fatalf("got %d %s %s; want %d application/problem+json of type …#%s", r.status, r.header.Get("Content-Type"), r.body, status, kind)
	}
}

func wantFresh(t *testing.T, r resp, status int) {
	t.Helper()
	if r.status != status || r.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("got %d (replayed %q) %s; want a fresh %d", r.status, r.header.Get("Idempotent-Replayed"), r.body, status)
	}
}

func wantReplay(t *testing.T, r resp, of resp) {
	t.Helper()
	if r.status != of.status || r.body != of.body || r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("got %d (replayed %q) %q; want a replay of %d %q", r.status, r.header.Get("Idempotent-Replayed"), r.body, of.status, of.body)
	}
}

// RunHTTP holds an Idempotency-Key middleware to the IETF draft's answers
// and to lockx's: every status code, replay of stored errors, principal
// isolation, expiry, body limits, and 100 concurrent requests with one key
// over three instances running the handler once.
func RunHTTP(t *testing.T, newServer NewServer, newGuards NewGuards) {
	t.Run("FirstThenReplay", func(t *testing.T) {
		h := start(t, newServer, newGuards, 2)
		k := newKey()
		first := h.do(0, "POST", "/orders", "alice", `{"sku":1}`, k)
		wantFresh(t, first, http.StatusCreated)
		again := h.do(1, "POST", "/orders", "alice", `{"sku":1}`, k) // the other instance
		wantReplay(t, again, first)
		if again.header.Get("Location") != first.header.Get("Location") || again.header.Get("Content-Type") != "application/json" {
			t.Fatalf("replayed headers %v, want Location and Content-Type of %v", again.header, first.header)
		}
		if again.header.Get("X-Not-Replayed") != "" {
			t.Fatal("a header outside ReplayHeaders was replayed")
		}
		if n := h.app.Runs("/orders"); n != 1 {
			t.Fatalf("handler ran %d times, want 1", n)
		}
	})

	t.Run("Missing", func(t *testing.T) {
		h := start(t, newServer, newGuards, 1)
		wantProblem(t, h.do(0, "POST", "/orders", "alice", "{}"), http.StatusBadRequest, "idempotency-key-missing")
		if r := h.do(0, "GET", "/orders", "alice", ""); r.status != http.StatusCreated {
			t.Fatalf("GET without a key: %d, want it passed through", r.status)
		}
		if n := h.app.Runs("/orders"); n != 1 {
			t.Fatalf("handler ran %d times, want 1 (the GET)", n)
		}
	})

	t.Run("Malformed", func(t *testing.T) {
		h := start(t, newServer, newGuards, 1)
		for name, keys := range map[string][]string{
			"unquoted":     {rand.Text()},
			"unterminated": {`"` + rand.Text()},
			"trailing":     {newKey() + ";a=1"},
			"short":        {`"a1b2c3"`},
			"low entropy":  {`"aaaaaaaaaaaaaaaaaaaaaaaa"`},
			"bad char":     {`"` + rand.Text() + `<>"`},
			"too long":     {`"` + strings.Repeat(rand.Text(), 20) + `"`},
			"two headers":  {newKey(), newKey()},
			"empty":        {`""`},
		} {
			r := h.do(0, "POST", "/orders", "alice", "{}", keys...)
			if r.status != http.StatusBadRequest || !strings.Contains(r.body, "idempotency-key-invalid") {
				t.Errorf("%s: got %d %s; want 400 idempotency-key-invalid", name, r.status, r.body)
			}
		}
		if n := h.app.Runs("/orders"); n != 0 {
			t.Fatalf("handler ran %d times for malformed keys", n)
		}
	})

	t.Run("Reused", func(t *testing.T) {
		h := start(t, newServer, newGuards, 1)
		k := newKey()
		wantFresh(t, h.do(0, "POST", "/orders", "alice", `{"sku":1}`, k), http.StatusCreated)
		wantProblem(t, h.do(0, "POST", "/orders", "alice", `{"sku":2}`, k), http.StatusUnprocessableEntity, "idempotency-key-reused")
		wantProblem(t, h.do(0, "POST", "/other", "alice", `{"sku":1}`, k), http.StatusUnprocessableEntity, "idempotency-key-reused")
		wantProblem(t, h.do(0, "PATCH", "/orders", "alice", `{"sku":1}`, k), http.StatusUnprocessableEntity, "idempotency-key-reused")
	})

	t.Run("InFlight", func(t *testing.T) {
		h := start(t, newServer, newGuards, 2)
		k := newKey()
		done := make(chan resp)
		// The first call is held in its handler until the second has been
		// answered: under load a sleep could end first, and the second call
		// would then rightly replay the first's outcome.
		go func() { done <- h.do(0, "POST", "/orders?hold=1", "alice", "{}", k) }()
		deadline := time.Now().Add(5 * time.Second)
		for h.app.Runs("/orders") == 0 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		r := h.do(1, "POST", "/orders?hold=1", "alice", "{}", k)
		h.app.Open()
		wantProblem(t, r, http.StatusConflict, "operation-in-progress")
		if r.header.Get("Retry-After") == "" {
			t.Fatal("409 without Retry-After")
		}
		first := <-done
		wantFresh(t, first, http.StatusCreated)
		wantReplay(t, h.do(1, "POST", "/orders?hold=1", "alice", "{}", k), first)
	})

	t.Run("PrincipalIsolation", func(t *testing.T) {
		h := start(t, newServer, newGuards, 1)
		k := newKey()
		a := h.do(0, "POST", "/orders", "alice", "{}", k)
		b := h.do(0, "POST", "/orders", "bob", "{}", k)
		wantFresh(t, a, http.StatusCreated)
		wantFresh(t, b, http.StatusCreated)
		if !strings.Contains(b.body, `"principal":"bob"`) {
			t.Fatalf("bob got %s", b.body)
		}
		wantReplay(t, h.do(0, "POST", "/orders", "alice", "{}", k), a)
		wantReplay(t, h.do(0, "POST", "/orders", "bob", "{}", k), b)
	})

	t.Run("StoredError", func(t *testing.T) {
		h := start(t, newServer, newGuards, 1)
		k := newKey()
		first := h.do(0, "POST", "/fail", "alice", "{}", k)
		if first.status != http.StatusInternalServerError {
			t.Fatalf("got %d", first.status)
		}
		wantReplay(t, h.do(0, "POST", "/fail", "alice", "{}", k), first)
		if n := h.app.Runs("/fail"); n != 1 {
			t.Fatalf("handler ran %d times, want 1", n)
		}
	})

	t.Run("RetryableStatus", func(t *testing.T) {
		h := start(t, newServer, newGuards, 1)
		k := newKey()
		for range 2 {
			wantFresh(t, h.do(0, "POST", "/busy", "alice", "{}", k), http.StatusServiceUnavailable)
		}
		if n := h.app.Runs("/busy"); n != 2 {
			t.Fatalf("handler ran %d times, want 2 (503 is not stored)", n)
		}
	})

	t.Run("Expiry", func(t *testing.T) {
		// The replay must land inside the retention: 1.5 s, not less, as two
		// requests under make test's load took longer than 300 ms.
		const retention = 1500 * time.Millisecond
		h := start(t, newServer, newGuards, 1, idempotency.WithRetention(retention))
		k := newKey()
		first := h.do(0, "POST", "/orders", "alice", "{}", k)
		wantReplay(t, h.do(0, "POST", "/orders", "alice", "{}", k), first)
		time.Sleep(retention + 300*time.Millisecond) // from the replay, which may renew the record
		wantFresh(t, h.do(0, "POST", "/orders", "alice", "{}", k), http.StatusCreated)
	})

	t.Run("BodyLimits", func(t *testing.T) {
		h := start(t, newServer, newGuards, 1)
		for _, size := range []int{0, MaxBodyBytes} {
			k := newKey()
			body := strings.Repeat("x", size)
			first := h.do(0, "POST", "/orders", "alice", body, k)
			wantFresh(t, first, http.StatusCreated)
			if !strings.Contains(first.body, `"body":"`+body+`"`) {
				t.Fatalf("handler did not get the %d-byte body", size)
			}
			wantReplay(t, h.do(0, "POST", "/orders", "alice", body, k), first)
		}
		wantProblem(t, h.do(0, "POST", "/orders", "alice", strings.Repeat("x", MaxBodyBytes+1), newKey()),
			http.StatusRequestEntityTooLarge, "request-too-large")
	})

	t.Run("ResponseLimit", func(t *testing.T) {
		h := start(t, newServer, newGuards, 1)
		k := newKey()
		path := fmt.Sprintf("/big?n=%d", MaxResponseBytes)
		first := h.do(0, "POST", path, "alice", "", k)
		if first.status != http.StatusOK || len(first.body) != MaxResponseBytes {
			t.Fatalf("got %d, %d bytes", first.status, len(first.body))
		}
		wantReplay(t, h.do(0, "POST", path, "alice", "", k), first)
		// One byte more: passed through, not stored, so a retry runs again.
		k = newKey()
		path = fmt.Sprintf("/big?n=%d", MaxResponseBytes+1)
		for range 2 {
			r := h.do(0, "POST", path, "alice", "", k)
			if r.status != http.StatusOK || len(r.body) != MaxResponseBytes+1 || r.header.Get("Idempotent-Replayed") != "" {
				t.Fatalf("oversized: got %d, %d bytes, replayed %q", r.status, len(r.body), r.header.Get("Idempotent-Replayed"))
			}
		}
		if n := h.app.Runs("/big"); n != 3 {
			t.Fatalf("handler ran %d times, want 3", n)
		}
	})

	t.Run("Concurrent100", func(t *testing.T) {
		h := start(t, newServer, newGuards, 3)
		k := newKey()
		var wg sync.WaitGroup
		var mu sync.Mutex
		counts := map[string]int{}
		gate := make(chan struct{})
		for i := range 100 {
			wg.Go(func() {
				<-gate
				r := h.do(i, "POST", "/orders?sleep=200", "alice", `{"sku":9}`, k)
				kind := strconv.Itoa(r.status)
				if r.header.Get("Idempotent-Replayed") == "true" {
					kind += " replayed"
				}
				mu.Lock()
				counts[kind]++
				mu.Unlock()
			})
		}
		close(gate)
		wg.Wait()
		if n := h.app.Runs("/orders"); n != 1 {
			t.Fatalf("handler ran %d times, want 1; answers %v", n, counts)
		}
		if counts["201"] != 1 || counts["201"]+counts["201 replayed"]+counts["409"] != 100 {
			t.Fatalf("answers %v; want one fresh 201, the rest 409 or replayed 201", counts)
		}
		t.Logf("answers over 3 instances: %v", counts)
	})
}

// StaticGuard is an Idempotency whose Run always fails with Err, for
// testing how a middleware answers a store that cannot be reached.
type StaticGuard struct{ Err error }

// Run implements lockx.Idempotency.
func (g StaticGuard) Run(context.Context, string, []byte, func(context.Context) ([]byte, error)) ([]byte, bool, error) {
	return nil, false, g.Err
}
