package middleware_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/middleware"
	"github.com/lockx-go/lockx/middleware/internal/fencetest"
)

func TestSerializeRunsOneAtATime(t *testing.T) {
	locks := lockx.New(memlock.New())
	defer locks.Close()
	var inside, maxInside atomic.Int32
	h := middleware.Serialize(locks, middleware.PathKey("acct:", "id"), middleware.WithWait(5*time.Second))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n := inside.Add(1)
			for {
				m := maxInside.Load()
				if n <= m || maxInside.CompareAndSwap(m, n) {
					break
				}
			}
			l, ok := lockx.LockFromContext(r.Context())
			if !ok || l.Key() != "acct:"+r.PathValue("id") {
				t.Errorf("handler context carries lock %v, %v", l, ok)
			}
			time.Sleep(2 * time.Millisecond)
			inside.Add(-1)
		}))
	mux := http.NewServeMux()
	mux.Handle("POST /acct/{id}", h)
	var wg sync.WaitGroup
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if rec := serve(mux, "POST", "/acct/1", nil); rec.Code != 200 {
				t.Errorf("status %d: %s", rec.Code, rec.Body)
			}
		}()
	}
	wg.Wait()
	if maxInside.Load() != 1 {
		t.Fatalf("%d requests ran at once", maxInside.Load())
	}
}

func TestSerializeBusy(t *testing.T) {
	ctx := context.Background()
	locks := lockx.New(memlock.New())
	defer locks.Close()
	held, err := locks.Acquire(ctx, "acct:1")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)
	called := false
	key := func(r *http.Request) (string, error) { return "acct:1", nil }
	h := middleware.Serialize(locks, key, middleware.WithWait(30*time.Millisecond), middleware.WithRetryAfter(3*time.Second))(
		http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true }))
	start := time.Now()
	rec := serve(h, "POST", "/", nil)
	if rec.Code != http.StatusLocked || rec.Header().Get("Retry-After") != "3" || called {
		t.Fatalf("status %d Retry-After %q called %v: %s", rec.Code, rec.Header().Get("Retry-After"), called, rec.Body)
	}
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Fatalf("gave up after %v, before the wait budget", d)
	}
	// No wait at all: refused at once.
	h = middleware.Serialize(locks, key, middleware.WithWait(0))(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	if rec := serve(h, "POST", "/", nil); rec.Code != http.StatusLocked {
		t.Fatalf("TryAcquire mode: status %d", rec.Code)
	}
}

func TestSerializeKeyErrors(t *testing.T) {
	locks := lockx.New(memlock.New())
	defer locks.Close()
	for name, tc := range map[string]struct {
		key    middleware.KeyFunc
		status int
	}{
		"error":     {func(*http.Request) (string, error) { return "", errors.New("no id in body") }, 400},
		"too long":  {func(*http.Request) (string, error) { return string(make([]byte, 600)), nil }, 400},
		"empty":     {func(*http.Request) (string, error) { return "", nil }, 200},
		"no method": {func(*http.Request) (string, error) { return "k", nil }, 200},
	} {
		t.Run(name, func(t *testing.T) {
			h := middleware.Serialize(locks, tc.key)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			if rec := serve(h, "GET", "/", nil); rec.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.status, rec.Body)
			}
		})
	}
	// WithMethods limits serialization: GET runs without the lock.
	h := middleware.Serialize(locks, func(*http.Request) (string, error) { return "k", nil }, middleware.WithMethods("POST"))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, ok := lockx.LockFromContext(r.Context()); ok {
				t.Error("GET ran under the lock")
			}
		}))
	serve(h, "GET", "/", nil)
}

func TestSerializeCancelsHandlerOnLoss(t *testing.T) {
	locks := lockx.New(memlock.New())
	defer locks.Close()
	cause := make(chan error, 1)
	h := middleware.Serialize(locks, func(*http.Request) (string, error) { return "k", nil },
		middleware.WithLockOptions(lockx.WithLease(30*time.Millisecond)))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
				cause <- context.Cause(r.Context())
			case <-time.After(5 * time.Second):
				cause <- nil
			}
		}))
	serve(h, "POST", "/", nil)
	if err := <-cause; !errors.Is(err, lockx.ErrLost) {
		t.Fatalf("handler context ended with %v, want ErrLost", err)
	}
}

func TestSerializeReleasesAfterHandler(t *testing.T) {
	ctx := context.Background()
	locks := lockx.New(memlock.New())
	defer locks.Close()
	h := middleware.Serialize(locks, func(*http.Request) (string, error) { return "k", nil })(
		http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) }))
	func() {
		defer func() { _ = recover() }()
		serve(h, "POST", "/", nil)
	}()
	l, err := locks.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatalf("lock still held after the handler panicked: %v", err)
	}
	_ = l.Release(ctx)
}

func TestSerializeUnavailable(t *testing.T) {
	locks := lockx.New(memlock.New())
	locks.Close()
	h := middleware.Serialize(locks, func(*http.Request) (string, error) { return "k", nil })(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	rec := serve(h, "POST", "/", nil)
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("closed client: status %d", rec.Code)
	}
}

// Two replicas of a service, each with its own lockx.Client over Redis,
// serialize the requests of one account between them.
func TestSerializeAcrossReplicas(t *testing.T) {
	var inside, maxInside atomic.Int32
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inside.Add(1)
		for m := maxInside.Load(); n > m && !maxInside.CompareAndSwap(m, n); m = maxInside.Load() {
		}
		time.Sleep(3 * time.Millisecond)
		inside.Add(-1)
	})
	var replicas []http.Handler
	for _, b := range fencetest.RedisBackends(t, 2) {
		locks := lockx.New(b)
		t.Cleanup(func() { _ = locks.Close() })
		mux := http.NewServeMux()
		mux.Handle("POST /acct/{id}", middleware.Serialize(locks, middleware.PathKey("acct:", "id"), middleware.WithWait(10*time.Second))(handler))
		replicas = append(replicas, mux)
	}
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if rec := serve(replicas[i%2], "POST", "/acct/1", nil); rec.Code != 200 {
				t.Errorf("status %d: %s", rec.Code, rec.Body)
			}
		}()
	}
	wg.Wait()
	if maxInside.Load() != 1 {
		t.Fatalf("%d requests ran at once across the replicas", maxInside.Load())
	}
}
