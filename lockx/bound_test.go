package lockx_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/memlock"
)

// deaf is a backend whose Acquire ignores its context: it blocks until
// gate closes, then applies the acquisition.
type deaf struct {
	*memlock.Backend
	gate    chan struct{}
	applied chan driver.Result // what the acquisition did, once it did
}

func (b *deaf) Acquire(ctx context.Context, req driver.Request) (driver.Result, error) {
	<-b.gate
	res, err := b.Backend.Acquire(context.Background(), req)
	b.applied <- res
	return res, err
}

// TestWaitBudgetDeafBackend: WithWait(d) returns within d + 100 ms even
// when the backend's call ignores its context, and the grant that call
// makes after the caller left is released, not leaked until its lease
// runs out.
func TestWaitBudgetDeafBackend(t *testing.T) {
	mem := memlock.New()
	b := &deaf{Backend: mem, gate: make(chan struct{}), applied: make(chan driver.Result, 1)}
	c := lockx.New(b)
	defer c.Close()
	const wait = 200 * time.Millisecond
	// The call answers, with a grant, well after the budget.
	opened := time.AfterFunc(5*wait, func() { close(b.gate) })
	defer opened.Stop()
	start := time.Now()
	_, err := c.Acquire(context.Background(), "k", lockx.WithWait(wait), lockx.WithLease(time.Hour))
	took := time.Since(start)
	if !errors.Is(err, lockx.ErrNotAcquired) {
		t.Fatalf("err = %v, want ErrNotAcquired", err)
	}
	if took > wait+100*time.Millisecond {
		t.Fatalf("Acquire(WithWait(%v)) took %v with a backend call that ignores its context", wait, took)
	}
	if res := <-b.applied; !res.Acquired {
		t.Fatalf("the late acquisition was refused: %+v", res)
	}
	// The late grant is freed behind the caller's back: another client
	// gets the lock soon after, not after the hour-long lease.
	other := lockx.New(mem)
	defer other.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		l, err := other.TryAcquire(context.Background(), "k")
		if err == nil {
			_ = l.Release(context.Background())
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the late grant was never released: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// releaseCounter counts the backend releases of a memlock backend.
type releaseCounter struct {
	*memlock.Backend
	releases atomic.Int64
}

func (b *releaseCounter) Release(ctx context.Context, key string, owner driver.Owner) error {
	b.releases.Add(1)
	return b.Backend.Release(ctx, key, owner)
}

// TestBudgetedGrantKept: an attempt under a wait budget that returns a
// grant in time is the caller's grant — never also abandoned as if it had
// been cut off. (The bounded call used to end its own context before
// handing its result over, and a caller that saw the context end first
// released the grant in the background while a retry by the same owner
// was told it held the lock: a holder without a lock.)
func TestBudgetedGrantKept(t *testing.T) {
	b := &releaseCounter{Backend: memlock.New()}
	c := lockx.New(b)
	ctx := context.Background()
	const n = 3000
	for i := range n {
		l, err := c.Acquire(ctx, "budgeted", lockx.WithWait(time.Minute), lockx.WithLease(time.Minute))
		if err != nil {
			t.Fatalf("acquire %d: %v", i, err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("release %d: %v", i, err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if got := b.releases.Load(); got != n {
		t.Fatalf("%d backend releases for %d acquisitions, each released once: %d grants abandoned behind their callers", got, n, got-n)
	}
}
