// Package suitekit holds the helpers the conformance suites share
// (lockx/lockxtest, patterns/rwlock/rwlocktest,
// patterns/semaphore/semaphoretest): fresh keys, bounded contexts, clients
// closed at cleanup, and waiters started in the background.
package suitekit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
)

// Client returns a new Client over a new backend of newBackend, closed at
// cleanup.
func Client(t *testing.T, newBackend func(t *testing.T) driver.Backend, opts ...lockx.Option) *lockx.Client {
	t.Helper()
	c := lockx.New(newBackend(t), opts...)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Later runs get in the background and returns where its result arrives:
// a grant or permit, or nil after an error, which fails t.
func Later[T any](t *testing.T, get func() (*T, error)) <-chan *T {
	got := make(chan *T, 1)
	report := Reporter(t)
	go func() {
		v, err := get()
		if err != nil {
			report(err)
		}
		got <- v
	}()
	return got
}

// Reporter returns t.Error for a goroutine that a test may end without
// waiting for (it failed first, e.g. with t.Fatal, while the goroutine still
// waited for a lock). Once the test's cleanups have begun — in particular
// the ones that cancel CtxT's contexts, registered before Reporter was
// called — a report is dropped: testing panics on a t.Error after the test
// has ended, which would hide the test's own failure and stop the package.
func Reporter(t *testing.T) func(args ...any) {
	var mu sync.Mutex
	ended := false
	t.Cleanup(func() {
		mu.Lock()
		ended = true
		mu.Unlock()
	})
	return func(args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if !ended {
			t.Helper()
			t.Error(args...)
		}
	}
}

// Served waits up to 5 s for the waiter started by Later to be served and
// gives back what it got with release (nil: the waiter failed, which
// failed t already). A waiter not served in time fails t with what.
func Served[T any](t *testing.T, got <-chan *T, release func(*testing.T, *T), what string) {
	t.Helper()
	select {
	case v := <-got:
		if v != nil {
			release(t, v)
		}
	case <-time.After(5 * time.Second):
		t.Fatal(what)
	}
}

// Key returns a key no other test uses.
func Key(t *testing.T) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "lxt:" + strings.ReplaceAll(t.Name(), "/", ".") + ":" + hex.EncodeToString(b[:])
}

// CtxT returns a context that ends after d or when t ends.
func CtxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// ClosedWithin reports whether ch is closed within d.
func ClosedWithin(ch <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

// WaitFor polls cond every millisecond until it holds, and fails t if it
// does not within d; what names the awaited state in the failure.
func WaitFor(t testing.TB, what string, d time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", d, what)
		}
	}
}

// HoldBriefly acquires key through c in a goroutine, sends the grant's
// token on the returned channel (0 after failing t), holds the lock for d
// and releases it.
func HoldBriefly(ctx context.Context, t testing.TB, c *lockx.Client, key string, d time.Duration, opts ...lockx.Option) <-chan lockx.Token {
	tok := make(chan lockx.Token, 1)
	go func() {
		l, err := c.Acquire(ctx, key, opts...)
		if err != nil {
			t.Error(err)
			tok <- 0
			return
		}
		tok <- l.Token()
		time.Sleep(d)
		_ = l.Release(ctx)
	}()
	return tok
}

// Releasable is what a suite holds: a lock grant or a semaphore permit.
type Releasable interface {
	Key() string
	Release(context.Context) error
}

// Must returns a function that fails t on an error and otherwise returns
// the value: Must[*lockx.Grant](t)(rw.RLock(…)).
func Must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// Release gives r back, failing t on an error.
func Release[T Releasable](t *testing.T, r T) {
	t.Helper()
	if err := r.Release(context.Background()); err != nil {
		t.Fatalf("Release(%q): %v", r.Key(), err)
	}
}

// Refused fails t unless err is a refusal (ErrNotAcquired); what the call
// got anyway is given back first.
func Refused[T Releasable](t *testing.T, what string, r T, err error) {
	t.Helper()
	if err == nil {
		_ = r.Release(context.Background())
		t.Fatalf("%s succeeded, want refusal", what)
	}
	if !errors.Is(err, lockx.ErrNotAcquired) {
		t.Fatalf("%s = %v, want ErrNotAcquired", what, err)
	}
}

// Capability returns capability C of a new backend of newBackend (the zero
// C if it has none), closing the backend at cleanup.
func Capability[C any](t *testing.T, newBackend func(t *testing.T) driver.Backend) C {
	b := newBackend(t)
	t.Cleanup(func() { _ = b.Close() })
	var c C
	driver.As(b, &c)
	return c
}

// Test is one subtest of a suite.
type Test struct {
	Name string
	Fn   func(t *testing.T)
}

// Parallel runs tests as parallel subtests of t.
func Parallel(t *testing.T, tests []Test) {
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			t.Parallel()
			tc.Fn(t)
		})
	}
}

// Require fails t unless the backends of newBackend have capability C.
func Require[C any](t *testing.T, newBackend func(t *testing.T) driver.Backend) {
	t.Helper()
	b := newBackend(t)
	ok := driver.As(b, new(C))
	_ = b.Close()
	if !ok {
		t.Fatalf("backend does not implement %v", reflect.TypeFor[C]())
	}
}
