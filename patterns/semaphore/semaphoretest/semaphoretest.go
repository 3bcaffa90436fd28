// Package semaphoretest is the conformance suite of
// driver.SemaphoreBackend, run through patterns/semaphore: a backend that
// serves counting semaphores calls
//
//	func TestSemaphoreConformance(t *testing.T) {
//		semaphoretest.Run(t, func(t *testing.T) driver.Backend { return mybackend.New(…) })
//	}
//
// newBackend follows lockxtest.Run's contract: every backend it returns
// reaches the same store. The suite lives beside the pattern it exercises,
// so that lockxtest depends on lockx and driver only.
package semaphoretest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockx-go/lockx/internal/suitekit"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/patterns/semaphore"
)

type suite struct {
	newBackend func(t *testing.T) driver.Backend
}

// Run runs the semaphore conformance suite (driver.SemaphoreBackend,
// through patterns/semaphore) as subtests of t. newBackend follows
// lockxtest.Run's contract; the backends it returns must implement
// driver.SemaphoreBackend.
func Run(t *testing.T, newBackend func(t *testing.T) driver.Backend) {
	suitekit.Require[driver.SemaphoreBackend](t, newBackend)
	s := &suite{newBackend: newBackend}
	suitekit.Parallel(t, []suitekit.Test{
		{Name: "LimitUnderContention", Fn: s.testSemLimit},
		{Name: "TryAcquireFull", Fn: s.testSemTry},
		{Name: "Weighted", Fn: s.testSemWeighted},
		{Name: "FIFONoStarvation", Fn: s.testSemFIFO},
		{Name: "CrashedHolderReturnsPermits", Fn: s.testSemCrashed},
		{Name: "WatchdogKeepsPermit", Fn: s.testSemWatchdog},
		{Name: "LostWhenTakenAway", Fn: s.testSemLost},
		{Name: "OnlyOwnerReleases", Fn: s.testSemOnlyOwner},
		{Name: "ShrinkRevokesNothing", Fn: s.testSemShrink},
		{Name: "ShrinkHoldsBackWaiter", Fn: s.testSemShrinkWaiter},
		{Name: "Grow", Fn: s.testSemGrow},
		{Name: "Usage", Fn: s.testSemUsage},
		{Name: "WakeUp", Fn: s.testSemWakeUp},
		{Name: "CloseReleases", Fn: s.testSemClose},
		{Name: "BadInput", Fn: s.testSemBadInput},
	})
}

func (s *suite) sem(t *testing.T, k string, limit int64, opts ...semaphore.Option) *semaphore.Semaphore {
	return semaphore.New(suitekit.Client(t, s.newBackend), k, limit, opts...)
}

// The suite's helpers over semaphore.Permit, from suitekit.
var (
	mustPermit    = suitekit.Must[*semaphore.Permit]
	releasePermit = suitekit.Release[*semaphore.Permit]
	noPermit      = suitekit.Refused[*semaphore.Permit]
)

func (s *suite) semBackend(t *testing.T) driver.SemaphoreBackend {
	return suitekit.Capability[driver.SemaphoreBackend](t, s.newBackend)
}

// testSemLimit: several clients, many goroutines, limit 3: never more than
// 3 holders, and everyone gets through.
func (s *suite) testSemLimit(t *testing.T) {
	k := suitekit.Key(t)
	const limit = 3
	var cur, peak, done atomic.Int64
	var wg sync.WaitGroup
	opts := []lockx.Option{lockx.WithBackoff(time.Millisecond, 20*time.Millisecond)}
	for i := 0; i < 4; i++ {
		sem := s.sem(t, k, limit)
		for j := 0; j < 4; j++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 0; n < 5; n++ {
					p, err := sem.Acquire(suitekit.CtxT(t, 30*time.Second), opts...)
					if err != nil {
						t.Error(err)
						return
					}
					c := cur.Add(1)
					if c > limit {
						t.Errorf("%d holders of a %d-permit semaphore", c, limit)
					}
					for m := peak.Load(); c > m && !peak.CompareAndSwap(m, c); m = peak.Load() {
					}
					time.Sleep(2 * time.Millisecond)
					cur.Add(-1)
					done.Add(1)
					_ = p.Release(context.Background())
				}
			}()
		}
	}
	wg.Wait()
	if done.Load() != 4*4*5 {
		t.Fatalf("%d acquisitions completed, want %d", done.Load(), 4*4*5)
	}
	t.Logf("peak %d holders", peak.Load())
}

func (s *suite) testSemTry(t *testing.T) {
	k := suitekit.Key(t)
	ctx := suitekit.CtxT(t, 5*time.Second)
	a, b := s.sem(t, k, 2), s.sem(t, k, 2)
	p1 := mustPermit(t)(a.TryAcquire(ctx))
	p2 := mustPermit(t)(b.TryAcquire(ctx))
	p, err := b.TryAcquire(ctx)
	noPermit(t, "TryAcquire on a full semaphore", p, err)
	releasePermit(t, p1)
	p3 := mustPermit(t)(b.TryAcquire(ctx))
	if p3.Token() <= p2.Token() || p2.Token() <= p1.Token() {
		t.Fatalf("permit tokens %v, %v, %v not increasing", p1.Token(), p2.Token(), p3.Token())
	}
	releasePermit(t, p2)
	releasePermit(t, p3)
	if err := p3.Release(ctx); !errors.Is(err, lockx.ErrNotHeld) {
		t.Fatalf("second Release = %v, want ErrNotHeld", err)
	}
}

func (s *suite) testSemWeighted(t *testing.T) {
	k := suitekit.Key(t)
	ctx := suitekit.CtxT(t, 5*time.Second)
	sem := s.sem(t, k, 4)
	big := mustPermit(t)(sem.TryAcquireN(ctx, 3))
	if big.N() != 3 {
		t.Fatalf("N = %d", big.N())
	}
	one := mustPermit(t)(s.sem(t, k, 4).TryAcquire(ctx))
	p, err := sem.TryAcquire(ctx)
	noPermit(t, "a fifth permit", p, err)
	releasePermit(t, big)
	p, err = sem.TryAcquireN(ctx, 4)
	noPermit(t, "four permits with one held", p, err)
	three := mustPermit(t)(sem.TryAcquireN(ctx, 3))
	releasePermit(t, one)
	releasePermit(t, three)
}

// testSemFIFO: a large request queued first is served before small ones
// that arrive later, even though they would fit.
func (s *suite) testSemFIFO(t *testing.T) {
	k := suitekit.Key(t)
	ctx := suitekit.CtxT(t, 20*time.Second)
	opts := []lockx.Option{lockx.WithBackoff(5*time.Millisecond, 50*time.Millisecond)}
	held := mustPermit(t)(s.sem(t, k, 3).Acquire(ctx))
	bigSem := s.sem(t, k, 3)
	got := suitekit.Later(t, func() (*semaphore.Permit, error) { return bigSem.AcquireN(ctx, 3, opts...) })
	time.Sleep(150 * time.Millisecond)
	p, err := s.sem(t, k, 3).TryAcquire(ctx)
	noPermit(t, "a small request overtaking a queued large one", p, err)
	// NonFair may overtake.
	nf := mustPermit(t)(s.sem(t, k, 3, semaphore.NonFair()).TryAcquire(ctx))
	releasePermit(t, nf)
	releasePermit(t, held)
	suitekit.Served(t, got, releasePermit, "large request not served after the permits came back")
}

func (s *suite) testSemCrashed(t *testing.T) {
	k := suitekit.Key(t)
	ctx := suitekit.CtxT(t, 10*time.Second)
	b := s.semBackend(t)
	// A holder that crashed right after its grant: nobody renews its lease.
	res, err := b.AcquirePermits(ctx, driver.PermitRequest{
		Request: driver.Request{Key: k, Owner: lockx.NewOwner(), Lease: 300 * time.Millisecond, Fair: true},
		Limit:   2, Count: 2,
	})
	if err != nil || !res.Acquired {
		t.Fatalf("AcquirePermits: %+v %v", res, err)
	}
	start := time.Now()
	p, err := s.sem(t, k, 2).AcquireN(ctx, 2, lockx.WithWait(5*time.Second), lockx.WithBackoff(5*time.Millisecond, 50*time.Millisecond))
	if err != nil {
		t.Fatalf("permits of a crashed holder never came back: %v", err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("waited %v for a 300ms lease", el)
	}
	releasePermit(t, p)
}

func (s *suite) testSemWatchdog(t *testing.T) {
	k := suitekit.Key(t)
	ctx := suitekit.CtxT(t, 10*time.Second)
	p := mustPermit(t)(s.sem(t, k, 1).Acquire(ctx, lockx.WithWatchdog(time.Second)))
	other := s.sem(t, k, 1)
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		q, err := other.TryAcquire(ctx)
		noPermit(t, "TryAcquire beside a renewed permit", q, err)
	}
	select {
	case <-p.Lost():
		t.Fatal("watchdog let the permit's lease lapse")
	default:
	}
	releasePermit(t, p)
}

func (s *suite) testSemLost(t *testing.T) {
	k := suitekit.Key(t)
	ctx := suitekit.CtxT(t, 10*time.Second)
	b := s.semBackend(t)
	// As in LostWhenTakenAway: a lease no delayed renewal lets lapse first.
	p := mustPermit(t)(s.sem(t, k, 1).Acquire(ctx, lockx.WithWatchdog(2*time.Second)))
	if err := b.ReleasePermits(ctx, k, p.Owner()); err != nil {
		t.Fatalf("force release: %v", err)
	}
	if !suitekit.ClosedWithin(p.Lost(), 5*time.Second) {
		t.Fatal("Lost did not fire after the permit was taken away")
	}
	if !errors.Is(context.Cause(p.Context()), lockx.ErrLost) {
		t.Fatalf("cause = %v, want ErrLost", context.Cause(p.Context()))
	}
	if err := p.Release(ctx); !errors.Is(err, lockx.ErrLost) {
		t.Fatalf("Release of a lost permit = %v, want ErrLost", err)
	}
	q := mustPermit(t)(s.sem(t, k, 1).Acquire(ctx, lockx.WithLease(150*time.Millisecond)))
	if !suitekit.ClosedWithin(q.Lost(), 2*time.Second) {
		t.Fatal("explicit permit lease did not end")
	}
}

func (s *suite) testSemOnlyOwner(t *testing.T) {
	k := suitekit.Key(t)
	ctx := suitekit.CtxT(t, 10*time.Second)
	p := mustPermit(t)(s.sem(t, k, 1).Acquire(ctx))
	b := s.semBackend(t)
	stranger := lockx.NewOwner()
	if err := b.ReleasePermits(ctx, k, stranger); !errors.Is(err, lockx.ErrNotHeld) {
		t.Fatalf("stranger's ReleasePermits = %v, want ErrNotHeld", err)
	}
	if err := b.ExtendPermits(ctx, k, stranger, time.Second); !errors.Is(err, lockx.ErrNotHeld) {
		t.Fatalf("stranger's ExtendPermits = %v, want ErrNotHeld", err)
	}
	q, err := s.sem(t, k, 1).TryAcquire(ctx)
	noPermit(t, "TryAcquire after a stranger's release", q, err)
	releasePermit(t, p)
}

func (s *suite) testSemShrink(t *testing.T) {
	k := suitekit.Key(t)
	ctx := suitekit.CtxT(t, 10*time.Second)
	sem := s.sem(t, k, 3)
	ps := []*semaphore.Permit{
		mustPermit(t)(sem.TryAcquire(ctx)), mustPermit(t)(sem.TryAcquire(ctx)), mustPermit(t)(sem.TryAcquire(ctx)),
	}
	if err := sem.SetLimit(1); err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if p.Context().Err() != nil {
			t.Fatal("shrinking revoked a held permit")
		}
	}
	releasePermit(t, ps[0])
	releasePermit(t, ps[1])
	p, err := sem.TryAcquire(ctx)
	noPermit(t, "TryAcquire with usage at the shrunk limit", p, err)
	releasePermit(t, ps[2])
	releasePermit(t, mustPermit(t)(sem.TryAcquire(ctx)))
}

// acquireLater starts an AcquireN of n permits of sem that retries every 5–50 ms and
// returns where its permit (nil on an error, which fails t) arrives.
func acquireLater(t *testing.T, ctx context.Context, sem *semaphore.Semaphore, n int64) <-chan *semaphore.Permit {
	return suitekit.Later(t, func() (*semaphore.Permit, error) {
		return sem.AcquireN(ctx, n, lockx.WithBackoff(5*time.Millisecond, 50*time.Millisecond))
	})
}

// testSemShrinkWaiter: a waiter that queued under a limit of 2, whose limit
// is lowered to 1, is not granted when a release leaves one holder (a
// backend that hands permits over to queued waiters must check the limit
// the waiter has now), and is granted once usage drops below the new limit.
func (s *suite) testSemShrinkWaiter(t *testing.T) {
	k := suitekit.Key(t)
	ctx := suitekit.CtxT(t, 30*time.Second)
	sem := s.sem(t, k, 2)
	a := mustPermit(t)(sem.TryAcquire(ctx))
	b := mustPermit(t)(sem.TryAcquire(ctx))
	// The limit travels with each attempt, so an attempt in flight across
	// SetLimit may still be decided under 2 (on etcd an attempt is several
	// round trips): the waiter retries only when woken, or after a second,
	// so that once queued it has nothing in flight when the limit changes
	// — and a backend that hands permits to queued waiters sees the entry
	// it queued under 2.
	got := suitekit.Later(t, func() (*semaphore.Permit, error) {
		return sem.Acquire(ctx, lockx.WithBackoff(time.Second, time.Second))
	})
	time.Sleep(200 * time.Millisecond) // queued with the limit 2
	if err := sem.SetLimit(1); err != nil {
		t.Fatal(err)
	}
	releasePermit(t, a)
	select {
	case p := <-got:
		t.Fatalf("granted (token %v) beside a holder after the limit went down to 1", p.Token())
	case <-time.After(500 * time.Millisecond):
	}
	releasePermit(t, b)
	suitekit.Served(t, got, releasePermit, "not granted after usage dropped below the new limit")
}

func (s *suite) testSemGrow(t *testing.T) {
	k := suitekit.Key(t)
	ctx := suitekit.CtxT(t, 10*time.Second)
	sem := s.sem(t, k, 1)
	p1 := mustPermit(t)(sem.TryAcquire(ctx))
	got := acquireLater(t, ctx, sem, 1)
	time.Sleep(100 * time.Millisecond)
	if err := sem.SetLimit(2); err != nil {
		t.Fatal(err)
	}
	suitekit.Served(t, got, releasePermit, "waiter not served after the limit grew")
	releasePermit(t, p1)
}

func (s *suite) testSemUsage(t *testing.T) {
	k := suitekit.Key(t)
	ctx := suitekit.CtxT(t, 10*time.Second)
	sem := s.sem(t, k, 4)
	if u, err := sem.Usage(ctx); err != nil || u != (driver.PermitUsage{}) {
		t.Fatalf("Usage of an unused semaphore = %+v, %v", u, err)
	}
	p1 := mustPermit(t)(sem.TryAcquireN(ctx, 3))
	p2 := mustPermit(t)(sem.TryAcquire(ctx))
	got := acquireLater(t, ctx, s.sem(t, k, 4), 2)
	// The waiter counts once its attempt has been refused and it waits;
	// how long that takes is the backend's and the machine's business.
	want := driver.PermitUsage{InUse: 4, Holders: 2, Waiting: 1}
	u, err := sem.Usage(ctx)
	for deadline := time.Now().Add(5 * time.Second); err == nil && u != want && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		u, err = sem.Usage(ctx)
	}
	if err != nil || u != want {
		t.Fatalf("Usage = %+v, %v; want 4 in use by 2, 1 waiting", u, err)
	}
	releasePermit(t, p1)
	releasePermit(t, p2)
	suitekit.Served(t, got, releasePermit, "waiter not served after the holders released")
}

func (s *suite) testSemWakeUp(t *testing.T) {
	b := s.newBackend(t)
	ok := driver.As(b, new(driver.Notifier))
	_ = b.Close()
	if !ok {
		t.Skip("backend does not implement driver.Notifier")
	}
	k := suitekit.Key(t)
	ctx := suitekit.CtxT(t, 30*time.Second)
	opts := []lockx.Option{lockx.WithBackoff(20*time.Second, 20*time.Second), lockx.WithQueueTTL(60 * time.Second)}
	p := mustPermit(t)(s.sem(t, k, 2).AcquireN(ctx, 2, opts...))
	got := make(chan *semaphore.Permit, 2)
	for i := 0; i < 2; i++ {
		sem, report := s.sem(t, k, 2), suitekit.Reporter(t)
		go func() {
			q, err := sem.Acquire(ctx, opts...)
			if err != nil {
				report(err)
			}
			got <- q
		}()
	}
	time.Sleep(200 * time.Millisecond)
	releasePermit(t, p)
	for i := 0; i < 2; i++ {
		select {
		case q := <-got:
			if q != nil {
				defer releasePermit(t, q)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("waiters not woken by the release")
		}
	}
}

func (s *suite) testSemClose(t *testing.T) {
	k := suitekit.Key(t)
	ctx := suitekit.CtxT(t, 10*time.Second)
	c := lockx.New(s.newBackend(t))
	p := mustPermit(t)(semaphore.New(c, k, 1).Acquire(ctx))
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if !suitekit.ClosedWithin(p.Context().Done(), 2*time.Second) || context.Cause(p.Context()) != lockx.ErrClosed {
		t.Fatalf("permit context after Close: cause %v, want ErrClosed", context.Cause(p.Context()))
	}
	q, err := s.sem(t, k, 1).Acquire(ctx, lockx.WithWait(2*time.Second), lockx.WithBackoff(5*time.Millisecond, 50*time.Millisecond))
	if err != nil {
		t.Fatalf("Close did not return the permit: %v", err)
	}
	releasePermit(t, q)
}

func (s *suite) testSemBadInput(t *testing.T) {
	ctx := suitekit.CtxT(t, 5*time.Second)
	c := suitekit.Client(t, s.newBackend)
	b := s.semBackend(t)
	cases := []struct {
		name string
		call func() error
	}{
		{"zero limit", func() error { _, err := semaphore.New(c, suitekit.Key(t), 0).TryAcquire(ctx); return err }},
		{"negative limit", func() error { _, err := semaphore.New(c, suitekit.Key(t), -1).Acquire(ctx); return err }},
		{"zero permits", func() error { _, err := semaphore.New(c, suitekit.Key(t), 2).AcquireN(ctx, 0); return err }},
		{"permits over limit", func() error { _, err := semaphore.New(c, suitekit.Key(t), 2).AcquireN(ctx, 3); return err }},
		{"empty key", func() error { _, err := semaphore.New(c, "", 2).Acquire(ctx); return err }},
		{"zero lease", func() error {
			_, err := semaphore.New(c, suitekit.Key(t), 2).Acquire(ctx, lockx.WithLease(0))
			return err
		}},
		{"nil client", func() error { _, err := semaphore.New(nil, suitekit.Key(t), 2).Acquire(ctx); return err }},
		{"SetLimit(0)", func() error { return semaphore.New(c, suitekit.Key(t), 2).SetLimit(0) }},
		{"backend zero limit", func() error {
			_, err := b.AcquirePermits(ctx, driver.PermitRequest{Request: driver.Request{Key: suitekit.Key(t), Owner: lockx.NewOwner(), Lease: time.Second}, Limit: 0, Count: 1})
			return err
		}},
		{"backend count over limit", func() error {
			_, err := b.AcquirePermits(ctx, driver.PermitRequest{Request: driver.Request{Key: suitekit.Key(t), Owner: lockx.NewOwner(), Lease: time.Second}, Limit: 1, Count: 2})
			return err
		}},
	}
	for _, tc := range cases {
		var ae *lockx.ArgError
		if err := tc.call(); !errors.Is(err, lockx.ErrInvalidArgument) || !errors.As(err, &ae) {
			t.Errorf("%s: err = %v, want *ArgError", tc.name, err)
		}
	}
	var nilPermit *semaphore.Permit
	if err := nilPermit.Release(ctx); !errors.Is(err, lockx.ErrNotHeld) {
		t.Errorf("nil Permit Release = %v", err)
	}
}
