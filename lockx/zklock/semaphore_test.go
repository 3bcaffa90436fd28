package zklock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/lockx-go/lockx/internal/backendtest"
	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/patterns/semaphore"
)

// TestSemaphoreAcrossBackends has several Backends (processes), each with
// several goroutines taking turns on one semaphore, take weighted permits:
// the permits held never exceed the limit, and every grant's token is new.
// Local turns reuse a listing that the other Backends' grants and releases
// make stale.
func TestSemaphoreAcrossBackends(t *testing.T) {
	z := testenv.SharedZooKeeper(t)
	backendtest.SemaphoreContention(t, func() *lockx.Client {
		c := lockx.New(dial(t, z.Addr))
		t.Cleanup(func() { _ = c.Close() })
		return c
	}, 3, 4, 4, 15, true)
}

// TestSemaphoreTurnWaitEndsWithContext: a request waiting behind another
// local attempt's turn gives up when its context ends.
func TestSemaphoreTurnWaitEndsWithContext(t *testing.T) {
	z := testenv.SharedZooKeeper(t)
	b := dial(t, z.Addr)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	k := "sem-turn-" + string(lockx.NewOwner())[:8]
	c := lockx.New(b)
	defer c.Close()
	sem := semaphore.New(c, k, 1)
	held, err := sem.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A queue of local waiters; each one's wait ends with its context.
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wctx, wcancel := context.WithTimeout(ctx, 300*time.Millisecond)
			defer wcancel()
			start := time.Now()
			p, err := sem.Acquire(wctx)
			if err == nil {
				t.Errorf("granted beside a holder of the only permit: %v", p.Token())
				return
			}
			if el := time.Since(start); el > 3*time.Second {
				t.Errorf("gave up after %v for a 300ms context", el)
			}
		}()
	}
	wg.Wait()
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	p, err := sem.TryAcquire(ctx)
	if err != nil {
		t.Fatalf("the permit did not come back: %v", err)
	}
	_ = p.Release(ctx)
}
