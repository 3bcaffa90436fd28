package lockx_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/memlock"
)

// recorder is an Observer that keeps every event.
type recorder struct {
	mu       sync.Mutex
	acquired []lockx.AcquireEvent
	extended []lockx.ExtendEvent
	released []lockx.ReleaseEvent
	ended    []lockx.HoldEvent
	waiting  int
	maxWait  int
}

func (r *recorder) Acquired(_ context.Context, e lockx.AcquireEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.acquired = append(r.acquired, e)
}

func (r *recorder) Extended(_ context.Context, e lockx.ExtendEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.extended = append(r.extended, e)
}

func (r *recorder) Released(_ context.Context, e lockx.ReleaseEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.released = append(r.released, e)
}

func (r *recorder) HoldEnded(e lockx.HoldEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ended = append(r.ended, e)
}

func (r *recorder) Waiting(_, _ string, d int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.waiting += d
	r.maxWait = max(r.maxWait, r.waiting)
}

func TestObserverEvents(t *testing.T) {
	rec := &recorder{}
	c := lockx.New(memlock.New(), lockx.WithObserver(rec), lockx.WithWatchdog(300*time.Millisecond))
	defer c.Close()
	ctx := context.Background()

	l, err := c.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Acquire(l.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.TryAcquire(ctx, "k"); !errors.Is(err, lockx.ErrNotAcquired) {
		t.Fatalf("TryAcquire: %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
	_, err = c.Acquire(wctx, "k")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire: %v", err)
	}
	time.Sleep(150 * time.Millisecond) // one watchdog renewal at lease/3
	if err := again.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}

	rec.mu.Lock()
	defer rec.mu.Unlock()
	want := []struct {
		status  lockx.Status
		newHold bool
		reentry bool
	}{{lockx.StatusOK, true, false}, {lockx.StatusOK, false, true}, {lockx.StatusNotAcquired, false, false}, {lockx.StatusTimeout, false, false}}
	if len(rec.acquired) != len(want) {
		t.Fatalf("%d acquire events, want %d", len(rec.acquired), len(want))
	}
	for i, w := range want {
		e := rec.acquired[i]
		if e.Status != w.status || e.NewHold != w.newHold || e.Reentry != w.reentry || e.Key != "k" || e.Kind != "lock" || e.Backend != "*memlock.Backend" {
			t.Errorf("acquire event %d: %+v, want %+v", i, e, w)
		}
	}
	if e := rec.acquired[3]; e.Attempts < 2 || e.WaitTime <= 0 {
		t.Errorf("waiting acquire: attempts %d, wait %v", e.Attempts, e.WaitTime)
	}
	if rec.maxWait != 1 || rec.waiting != 0 {
		t.Errorf("waiters: max %d, now %d; want 1, 0", rec.maxWait, rec.waiting)
	}
	if len(rec.extended) == 0 || !rec.extended[0].Watchdog || rec.extended[0].Status != lockx.StatusOK {
		t.Errorf("extend events: %+v", rec.extended)
	}
	if len(rec.released) != 2 || rec.released[0].Final || !rec.released[1].Final {
		t.Errorf("release events: %+v", rec.released)
	}
	if len(rec.ended) != 1 || rec.ended[0].Status != lockx.StatusOK || rec.ended[0].Held <= 0 {
		t.Errorf("hold events: %+v", rec.ended)
	}
}

func TestObserverLost(t *testing.T) {
	rec := &recorder{}
	b := memlock.New()
	c := lockx.New(b, lockx.WithObserver(rec))
	defer c.Close()
	ctx := context.Background()
	l, err := c.Acquire(ctx, "k", lockx.WithLease(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	<-l.Lost()
	if err := l.Release(ctx); !errors.Is(err, lockx.ErrLost) {
		t.Fatalf("Release: %v", err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.ended) != 1 || rec.ended[0].Status != lockx.StatusLost {
		t.Fatalf("hold events: %+v", rec.ended)
	}
	if len(rec.released) != 1 || rec.released[0].Status != lockx.StatusLost {
		t.Fatalf("release events: %+v", rec.released)
	}
}

func TestStatusOf(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want lockx.Status
	}{
		{nil, lockx.StatusOK},
		{lockx.ErrNotAcquired, lockx.StatusNotAcquired},
		{errors.Join(lockx.ErrNotAcquired, context.DeadlineExceeded), lockx.StatusTimeout},
		{driver.Unavailable("acquire", errors.New("boom")), lockx.StatusUnavailable},
		{&lockx.KeyError{Op: "release", Key: "k", Err: lockx.ErrLost}, lockx.StatusLost},
		{&lockx.ArgError{Arg: "key", Reason: "empty"}, lockx.StatusInvalid},
	} {
		if got := lockx.StatusOf(tc.err); got != tc.want {
			t.Errorf("StatusOf(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}

// BenchmarkAcquireRelease measures uncontended acquire+release on memlock,
// without and with an Observer: "off" must allocate no more than the core did
// before observation existed.
func BenchmarkAcquireRelease(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts []lockx.Option
	}{
		{"observer=off", nil},
		{"observer=nop", []lockx.Option{lockx.WithObserver(lockx.NopObserver{})}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := lockx.New(memlock.New(), bc.opts...)
			defer c.Close()
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				l, err := c.Acquire(ctx, "bench")
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
