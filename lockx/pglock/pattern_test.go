package pglock_test

import (
	"testing"
	"time"

	"github.com/lockx-go/lockx/internal/backendtest"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/lockxtest"
	"github.com/lockx-go/lockx/lockx/pglock"
	"github.com/lockx-go/lockx/patterns/semaphore"
)

// patternBackend returns a factory of Backends on one schema, each with one
// holder session, as separate processes would have.
func patternBackend(e *env) func(t *testing.T) lockx.Backend {
	return func(t *testing.T) lockx.Backend {
		b := pglock.New(e.pool, pglock.WithSchema(e.schema), pglock.WithSessions(1))
		t.Cleanup(func() { _ = b.Close() })
		if err := b.Connect(ctxT(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
		return b
	}
}

func TestRWConformance(t *testing.T) {
	e := newEnv(t, 40)
	lockxtest.RunRW(t, patternBackend(e))
}

func TestSemaphoreConformance(t *testing.T) {
	e := newEnv(t, 40)
	lockxtest.RunSemaphore(t, patternBackend(e))
}

// TestSemaphoreAcrossProcesses has several Backends (processes), each with
// several goroutines whose decisions it combines, take weighted permits of
// one semaphore: the limit is never exceeded at any moment.
func TestSemaphoreAcrossProcesses(t *testing.T) {
	e := newEnv(t, 24)
	backendtest.SemaphoreContention(t, func() *lockx.Client {
		c, _ := e.client(t, pglock.WithSessions(1))
		return c
	}, 3, 3, 4, 8, true)
}

// TestSemaphoreShrinkStopsHandOver: a waiter queued under a limit of 2
// whose limit is lowered to 1 is not granted by a release while the other
// holder keeps usage at 1 (a release hands permits over under the limit
// the waiter queued with; its confirmation checks the limit it has now),
// and is granted once usage drops below the new limit.
func TestSemaphoreShrinkStopsHandOver(t *testing.T) {
	e := newEnv(t, 24)
	ctx := ctxT(t, 30*time.Second)
	c, _ := e.client(t, pglock.WithSessions(1))
	k := "sem-shrink-" + randHex(4)
	sem := semaphore.New(c, k, 2)
	a := mustAcquire(t)(sem.Acquire(ctx))
	b := mustAcquire(t)(sem.Acquire(ctx))
	got := make(chan *semaphore.Permit, 1)
	go func() {
		p, err := sem.Acquire(ctx, lockx.WithBackoff(5*time.Millisecond, 50*time.Millisecond))
		if err != nil {
			t.Error(err)
		}
		got <- p
	}()
	time.Sleep(200 * time.Millisecond) // queued with the limit 2
	if err := sem.SetLimit(1); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-got:
		t.Fatalf("granted (token %v) beside a holder after the limit went down to 1", p.Token())
	case <-time.After(500 * time.Millisecond):
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-got:
		if p == nil {
			t.Fatal("no permit")
		}
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("not granted after usage dropped below the new limit")
	}
}

func mustAcquire(t *testing.T) func(*semaphore.Permit, error) *semaphore.Permit {
	return func(p *semaphore.Permit, err error) *semaphore.Permit {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
}
