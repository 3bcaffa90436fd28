package lockx_test

import (
	"context"
	"errors"
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
