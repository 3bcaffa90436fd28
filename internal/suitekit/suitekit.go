// Package suitekit holds the helpers the conformance suites share
// (lockx/lockxtest, patterns/rwlock/rwlocktest,
// patterns/semaphore/semaphoretest): fresh keys, bounded contexts, clients
// closed at cleanup, and waiters started in the background.
package suitekit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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
