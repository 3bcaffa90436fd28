// Package lockxtest is the conformance suite every lockx backend runs, in the
// spirit of testing/fstest: a backend's test calls
//
//	func TestConformance(t *testing.T) {
//		lockxtest.Run(t, func(t *testing.T) driver.Backend { return mybackend.New(...) })
//	}
//
// and gets every semantic lockx promises checked against the real store:
// mutual exclusion, owner checks, reentrancy, fencing tokens, leases and the
// watchdog, loss signalling, waiting and wake-up, fair order, crashed
// waiters, bad input and retry idempotency.
//
// newBackend is called several times per test, once for each independent
// client; every Backend it returns must reach the same store (for an
// in-process backend, return the same instance). Tests use random keys, so
// a shared server is fine, and run in parallel.
package lockxtest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockx-go/lockx/internal/suitekit"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
)

// Run runs the conformance suite as subtests of t.
func Run(t *testing.T, newBackend func(t *testing.T) driver.Backend) {
	s := &suite{newBackend: newBackend}
	suitekit.Parallel(t, []suitekit.Test{
		{Name: "MutualExclusion", Fn: s.testMutualExclusion},
		{Name: "TryAcquireHeld", Fn: s.testTryAcquireHeld},
		{Name: "ReleaseTwice", Fn: s.testReleaseTwice},
		{Name: "OnlyOwnerExtendsOrReleases", Fn: s.testOnlyOwner},
		{Name: "BackendAcquireIdempotent", Fn: s.testBackendAcquireIdempotent},
		{Name: "StaleReleaseKeepsNewOwner", Fn: s.testStaleRelease},
		{Name: "Reentrancy", Fn: s.testReentrancy},
		{Name: "TokensIncrease", Fn: s.testTokensIncrease},
		{Name: "TokensIncreaseAfterExpiry", Fn: s.testTokensAfterExpiry},
		{Name: "WatchdogKeepsLease", Fn: s.testWatchdog},
		{Name: "ExplicitLeaseExpires", Fn: s.testLeaseExpires},
		{Name: "LostWhenTakenAway", Fn: s.testLostWhenTakenAway},
		{Name: "ReleaseStopsRenewal", Fn: s.testReleaseStopsRenewal},
		{Name: "WaiterAcquiresAfterRelease", Fn: s.testWaiterAcquires},
		{Name: "WakeUpWithoutPolling", Fn: s.testWakeUp},
		{Name: "ContextEndsWait", Fn: s.testContextEndsWait},
		{Name: "WaitBudget", Fn: s.testWaitBudget},
		{Name: "FairOrder", Fn: s.testFairOrder},
		{Name: "FairCrashedWaiter", Fn: s.testFairCrashedWaiter},
		{Name: "FairTryDoesNotQueue", Fn: s.testFairTry},
		{Name: "BadInput", Fn: s.testBadInput},
		{Name: "Do", Fn: s.testDo},
		{Name: "DoLost", Fn: s.testDoLost},
		{Name: "LocalFirst", Fn: s.testLocalFirst},
		{Name: "Pass", Fn: s.testPass},
		{Name: "CloseReleases", Fn: s.testCloseReleases},
		{Name: "TTLAndExtend", Fn: s.testTTLAndExtend},
	})
}

type suite struct {
	newBackend func(t *testing.T) driver.Backend
}

func mustAcquire(t *testing.T, c *lockx.Client, ctx context.Context, k string, opts ...lockx.Option) *lockx.Lock {
	t.Helper()
	l, err := c.Acquire(ctx, k, opts...)
	if err != nil {
		t.Fatalf("Acquire(%q): %v", k, err)
	}
	return l
}

func mustRelease(t *testing.T, l *lockx.Lock) {
	t.Helper()
	if err := l.Release(context.Background()); err != nil {
		t.Fatalf("Release(%q): %v", l.Key(), err)
	}
}

func expectNotAcquired(t *testing.T, c *lockx.Client, k string) {
	t.Helper()
	l, err := c.TryAcquire(suitekit.CtxT(t, 5*time.Second), k)
	if err == nil {
		_ = l.Release(context.Background())
		t.Fatalf("TryAcquire(%q) succeeded while another owner holds it", k)
	}
	if !errors.Is(err, lockx.ErrNotAcquired) {
		t.Fatalf("TryAcquire(%q) = %v, want ErrNotAcquired", k, err)
	}
}

func (s *suite) testMutualExclusion(t *testing.T) {
	k := suitekit.Key(t)
	clients := []*lockx.Client{suitekit.Client(t, s.newBackend), suitekit.Client(t, s.newBackend), suitekit.Client(t, s.newBackend)}
	const goroutines, rounds = 9, 15
	var inside, maxInside, total atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(c *lockx.Client) {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				l, err := c.Acquire(suitekit.CtxT(t, 30*time.Second), k, lockx.WithBackoff(time.Millisecond, 20*time.Millisecond))
				if err != nil {
					errs <- err
					return
				}
				raise(&maxInside, inside.Add(1))
				time.Sleep(200 * time.Microsecond)
				inside.Add(-1)
				total.Add(1)
				if err := l.Release(context.Background()); err != nil {
					errs <- err
					return
				}
			}
		}(clients[g%len(clients)])
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if maxInside.Load() != 1 {
		t.Fatalf("%d holders at once, want 1", maxInside.Load())
	}
	if total.Load() != goroutines*rounds {
		t.Fatalf("%d critical sections, want %d", total.Load(), goroutines*rounds)
	}
}

func (s *suite) testTryAcquireHeld(t *testing.T) {
	k := suitekit.Key(t)
	c1, c2 := suitekit.Client(t, s.newBackend), suitekit.Client(t, s.newBackend)
	l := mustAcquire(t, c1, suitekit.CtxT(t, 5*time.Second), k)
	expectNotAcquired(t, c2, k)
	mustRelease(t, l)
	l2, err := c2.TryAcquire(suitekit.CtxT(t, 5*time.Second), k)
	if err != nil {
		t.Fatalf("TryAcquire after release: %v", err)
	}
	mustRelease(t, l2)
}

func (s *suite) testReleaseTwice(t *testing.T) {
	c := suitekit.Client(t, s.newBackend)
	l := mustAcquire(t, c, suitekit.CtxT(t, 5*time.Second), suitekit.Key(t))
	mustRelease(t, l)
	if err := l.Release(context.Background()); !errors.Is(err, lockx.ErrNotHeld) {
		t.Fatalf("second Release = %v, want ErrNotHeld", err)
	}
	var nilLock *lockx.Lock
	if err := nilLock.Release(context.Background()); !errors.Is(err, lockx.ErrNotHeld) {
		t.Fatalf("nil Lock Release = %v, want ErrNotHeld", err)
	}
}

func (s *suite) testOnlyOwner(t *testing.T) {
	k := suitekit.Key(t)
	c := suitekit.Client(t, s.newBackend)
	b := s.newBackend(t)
	t.Cleanup(func() { _ = b.Close() })
	l := mustAcquire(t, c, suitekit.CtxT(t, 5*time.Second), k)
	ctx := suitekit.CtxT(t, 5*time.Second)
	other := lockx.NewOwner()
	if err := b.Release(ctx, k, other); !errors.Is(err, lockx.ErrNotHeld) {
		t.Fatalf("Release by another owner = %v, want ErrNotHeld", err)
	}
	if err := b.Extend(ctx, k, other, time.Minute); !errors.Is(err, lockx.ErrNotHeld) {
		t.Fatalf("Extend by another owner = %v, want ErrNotHeld", err)
	}
	if _, err := b.TTL(ctx, k, other); !errors.Is(err, lockx.ErrNotHeld) {
		t.Fatalf("TTL by another owner = %v, want ErrNotHeld", err)
	}
	expectNotAcquired(t, suitekit.Client(t, s.newBackend), k)
	select {
	case <-l.Lost():
		t.Fatal("holder lost its lock after another owner's release attempt")
	default:
	}
	mustRelease(t, l)
}

func (s *suite) testBackendAcquireIdempotent(t *testing.T) {
	k := suitekit.Key(t)
	b := s.newBackend(t)
	t.Cleanup(func() { _ = b.Close() })
	ctx := suitekit.CtxT(t, 5*time.Second)
	req := driver.Request{Key: k, Owner: lockx.NewOwner(), Lease: 10 * time.Second}
	r1, err := b.Acquire(ctx, req)
	if err != nil || !r1.Acquired {
		t.Fatalf("Acquire = %+v, %v", r1, err)
	}
	r2, err := b.Acquire(ctx, req) // a retry whose first reply was lost
	if err != nil || !r2.Acquired || r2.Token != r1.Token {
		t.Fatalf("retried Acquire = %+v, %v; want same token %d", r2, err, r1.Token)
	}
	if err := b.Release(ctx, k, req.Owner); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := b.Release(ctx, k, req.Owner); !errors.Is(err, lockx.ErrNotHeld) {
		t.Fatalf("retried Release = %v, want ErrNotHeld (no double count)", err)
	}
	r3, err := b.Acquire(ctx, driver.Request{Key: k, Owner: lockx.NewOwner(), Lease: time.Second})
	if err != nil || !r3.Acquired {
		t.Fatalf("Acquire after single release = %+v, %v: a retried acquire was double-counted", r3, err)
	}
	if r3.Token <= r1.Token {
		t.Fatalf("token %d not greater than earlier %d", r3.Token, r1.Token)
	}
}

func (s *suite) testStaleRelease(t *testing.T) {
	k := suitekit.Key(t)
	b := s.newBackend(t)
	t.Cleanup(func() { _ = b.Close() })
	ctx := suitekit.CtxT(t, 5*time.Second)
	a, bOwner := lockx.NewOwner(), lockx.NewOwner()
	if r, err := b.Acquire(ctx, driver.Request{Key: k, Owner: a, Lease: 10 * time.Second}); err != nil || !r.Acquired {
		t.Fatalf("Acquire a: %+v %v", r, err)
	}
	if err := b.Release(ctx, k, a); err != nil {
		t.Fatal(err)
	}
	if r, err := b.Acquire(ctx, driver.Request{Key: k, Owner: bOwner, Lease: 10 * time.Second}); err != nil || !r.Acquired {
		t.Fatalf("Acquire b: %+v %v", r, err)
	}
	if err := b.Release(ctx, k, a); !errors.Is(err, lockx.ErrNotHeld) { // a's retried release arrives late
		t.Fatalf("stale Release = %v, want ErrNotHeld", err)
	}
	if _, err := b.TTL(ctx, k, bOwner); err != nil {
		t.Fatalf("new owner lost its lock to a stale release: %v", err)
	}
	_ = b.Release(ctx, k, bOwner)
}

func (s *suite) testReentrancy(t *testing.T) {
	k := suitekit.Key(t)
	c := suitekit.Client(t, s.newBackend)
	ctx := suitekit.CtxT(t, 5*time.Second)
	l1 := mustAcquire(t, c, ctx, k)
	l2, err := c.TryAcquire(l1.Context(), k)
	if err != nil {
		t.Fatalf("reentrant TryAcquire: %v", err)
	}
	if l2.Token() != l1.Token() || l2.Owner() != l1.Owner() {
		t.Fatalf("reentrant handle token/owner %d/%s, want %d/%s", l2.Token(), l2.Owner(), l1.Token(), l1.Owner())
	}
	l3 := mustAcquire(t, c, lockx.ContextWithOwner(ctx, l1.Owner()), k)
	expectNotAcquired(t, c, k) // a fresh owner on the same client does not re-enter
	mustRelease(t, l1)
	mustRelease(t, l3)
	expectNotAcquired(t, suitekit.Client(t, s.newBackend), k)
	if l2.Context().Err() != nil {
		t.Fatal("lock context cancelled while a handle is still held")
	}
	mustRelease(t, l2)
	if context.Cause(l2.Context()) != lockx.ErrReleased {
		t.Fatalf("context cause after last release = %v, want ErrReleased", context.Cause(l2.Context()))
	}
	l4, err := suitekit.Client(t, s.newBackend).TryAcquire(ctx, k)
	if err != nil {
		t.Fatalf("TryAcquire after all handles released: %v", err)
	}
	mustRelease(t, l4)
}

func (s *suite) testTokensIncrease(t *testing.T) {
	k := suitekit.Key(t)
	cs := []*lockx.Client{suitekit.Client(t, s.newBackend), suitekit.Client(t, s.newBackend)}
	var last lockx.Token
	for i := 0; i < 20; i++ {
		l := mustAcquire(t, cs[i%2], suitekit.CtxT(t, 5*time.Second), k)
		if l.Token() <= last {
			t.Fatalf("grant %d: token %d not greater than %d", i, l.Token(), last)
		}
		if l.Token() > lockx.MaxToken {
			t.Fatalf("token %d above MaxToken", l.Token())
		}
		last = l.Token()
		mustRelease(t, l)
	}
}

func (s *suite) testTokensAfterExpiry(t *testing.T) {
	k := suitekit.Key(t)
	c1, c2 := suitekit.Client(t, s.newBackend), suitekit.Client(t, s.newBackend)
	l1 := mustAcquire(t, c1, suitekit.CtxT(t, 5*time.Second), k, lockx.WithLease(100*time.Millisecond))
	if !suitekit.ClosedWithin(l1.Lost(), 3*time.Second) {
		t.Fatal("explicit lease did not expire")
	}
	time.Sleep(150 * time.Millisecond)
	l2 := mustAcquire(t, c2, suitekit.CtxT(t, 5*time.Second), k)
	if l2.Token() <= l1.Token() {
		t.Fatalf("token after expiry %d not greater than %d", l2.Token(), l1.Token())
	}
	mustRelease(t, l2)
	time.Sleep(50 * time.Millisecond)
	l3 := mustAcquire(t, c1, suitekit.CtxT(t, 5*time.Second), k)
	if l3.Token() <= l2.Token() {
		t.Fatalf("token after release %d not greater than %d", l3.Token(), l2.Token())
	}
	mustRelease(t, l3)
}

func (s *suite) testWatchdog(t *testing.T) {
	k := suitekit.Key(t)
	c := suitekit.Client(t, s.newBackend)
	// Watch for three leases. A 1 s lease leaves the renewals (every
	// ~330 ms) room for a loaded machine's scheduling delays.
	l := mustAcquire(t, c, suitekit.CtxT(t, 10*time.Second), k, lockx.WithWatchdog(time.Second))
	other := suitekit.Client(t, s.newBackend)
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		expectNotAcquired(t, other, k)
		time.Sleep(100 * time.Millisecond)
	}
	select {
	case <-l.Lost():
		t.Fatal("watchdog let the lease lapse")
	default:
	}
	d, err := l.TTL(suitekit.CtxT(t, 5*time.Second))
	if err != nil || d <= 0 || d > time.Second {
		t.Fatalf("TTL = %v, %v; want in (0, 1s]", d, err)
	}
	mustRelease(t, l)
}

func (s *suite) testLeaseExpires(t *testing.T) {
	k := suitekit.Key(t)
	c := suitekit.Client(t, s.newBackend)
	l := mustAcquire(t, c, suitekit.CtxT(t, 5*time.Second), k, lockx.WithLease(150*time.Millisecond))
	if !suitekit.ClosedWithin(l.Lost(), 3*time.Second) {
		t.Fatal("Lost did not fire after the explicit lease")
	}
	if context.Cause(l.Context()) != lockx.ErrLost {
		t.Fatalf("context cause = %v, want ErrLost", context.Cause(l.Context()))
	}
	time.Sleep(100 * time.Millisecond) // local validity ends before the server's lease
	l2, err := suitekit.Client(t, s.newBackend).Acquire(suitekit.CtxT(t, 5*time.Second), k, lockx.WithWait(3*time.Second))
	if err != nil {
		t.Fatalf("Acquire after lease expiry: %v", err)
	}
	if err := l.Release(context.Background()); !errors.Is(err, lockx.ErrLost) {
		t.Fatalf("Release of a lost lock = %v, want ErrLost", err)
	}
	if _, err := l2.TTL(suitekit.CtxT(t, 5*time.Second)); err != nil {
		t.Fatalf("the lost lock's Release freed the new owner's lock: %v", err)
	}
	mustRelease(t, l2)
}

func (s *suite) testLostWhenTakenAway(t *testing.T) {
	k := suitekit.Key(t)
	c := suitekit.Client(t, s.newBackend)
	b := s.newBackend(t)
	t.Cleanup(func() { _ = b.Close() })
	// The lease is long enough that a renewal delayed by a loaded machine
	// does not let it lapse before the force-unlock below (which would
	// then rightly find nothing held); Lost follows at a renewal.
	l := mustAcquire(t, c, suitekit.CtxT(t, 10*time.Second), k, lockx.WithWatchdog(2*time.Second))
	// An operator's force-unlock: the lock is gone behind the holder's back.
	if err := b.Release(suitekit.CtxT(t, 5*time.Second), k, l.Owner()); err != nil {
		t.Fatalf("force release: %v", err)
	}
	if !suitekit.ClosedWithin(l.Lost(), 5*time.Second) {
		t.Fatal("Lost did not fire after the lease was taken away")
	}
	if !errors.Is(context.Cause(l.Context()), lockx.ErrLost) {
		t.Fatalf("context cause = %v, want ErrLost", context.Cause(l.Context()))
	}
}

func (s *suite) testReleaseStopsRenewal(t *testing.T) {
	k := suitekit.Key(t)
	c := suitekit.Client(t, s.newBackend)
	l := mustAcquire(t, c, suitekit.CtxT(t, 5*time.Second), k, lockx.WithWatchdog(200*time.Millisecond))
	mustRelease(t, l)
	if context.Cause(l.Context()) != lockx.ErrReleased {
		t.Fatalf("cause = %v, want ErrReleased", context.Cause(l.Context()))
	}
	select {
	case <-l.Lost():
		t.Fatal("Lost closed by Release")
	default:
	}
	// Another owner takes the key with a short lease; a watchdog still
	// running for the old hold could not renew it (owner check), and the new
	// lease must expire on schedule.
	b := s.newBackend(t)
	t.Cleanup(func() { _ = b.Close() })
	ctx := suitekit.CtxT(t, 5*time.Second)
	o := lockx.NewOwner()
	r, err := b.Acquire(ctx, driver.Request{Key: k, Owner: o, Lease: 150 * time.Millisecond})
	if err != nil || !r.Acquired {
		t.Fatalf("Acquire: %+v %v", r, err)
	}
	time.Sleep(400 * time.Millisecond)
	if _, err := b.TTL(ctx, k, o); !errors.Is(err, lockx.ErrNotHeld) {
		t.Fatalf("lease after 400ms: %v, want expired", err)
	}
	if err := l.Extend(ctx, time.Second); !errors.Is(err, lockx.ErrNotHeld) {
		t.Fatalf("Extend after Release = %v, want ErrNotHeld", err)
	}
}

func (s *suite) testWaiterAcquires(t *testing.T) {
	k := suitekit.Key(t)
	c1, c2 := suitekit.Client(t, s.newBackend), suitekit.Client(t, s.newBackend)
	l := mustAcquire(t, c1, suitekit.CtxT(t, 5*time.Second), k)
	ctx := suitekit.CtxT(t, 10*time.Second)
	got := suitekit.Later(t, func() (*lockx.Lock, error) {
		return c2.Acquire(ctx, k, lockx.WithBackoff(5*time.Millisecond, 50*time.Millisecond))
	})
	time.Sleep(100 * time.Millisecond)
	select {
	case <-got:
		t.Fatal("waiter acquired a held lock")
	default:
	}
	mustRelease(t, l)
	l2 := <-got
	if l2 == nil {
		return
	}
	if l2.Token() <= l.Token() {
		t.Fatalf("waiter token %d not greater than %d", l2.Token(), l.Token())
	}
	mustRelease(t, l2)
}

func (s *suite) testWakeUp(t *testing.T) {
	if !driver.As(s.newBackend(t), new(driver.Notifier)) {
		t.Skip("backend does not implement driver.Notifier")
	}
	for _, fair := range []bool{false, true} {
		k := suitekit.Key(t)
		c1, c2 := suitekit.Client(t, s.newBackend), suitekit.Client(t, s.newBackend)
		opts := []lockx.Option{lockx.WithBackoff(20*time.Second, 20*time.Second)}
		if fair {
			opts = append(opts, lockx.Fair(), lockx.WithQueueTTL(60*time.Second))
		}
		l := mustAcquire(t, c1, suitekit.CtxT(t, 5*time.Second), k, opts...)
		got := make(chan time.Time, 1)
		ctx, report := suitekit.CtxT(t, 30*time.Second), suitekit.Reporter(t)
		go func() {
			l2, err := c2.Acquire(ctx, k, opts...)
			if err != nil {
				report(err)
				got <- time.Time{}
				return
			}
			got <- time.Now()
			_ = l2.Release(context.Background())
		}()
		time.Sleep(200 * time.Millisecond) // the waiter has made its attempt
		released := time.Now()
		mustRelease(t, l)
		// Backoff is ≥ 10 s and the holder's lease 30 s: only a
		// notification can make the waiter acquire within seconds.
		select {
		case at := <-got:
			if at.IsZero() {
				return
			}
			t.Logf("fair=%v: woken %v after release", fair, at.Sub(released))
		case <-time.After(5 * time.Second):
			t.Fatalf("fair=%v: waiter not woken by the release", fair)
		}
	}
}

func (s *suite) testContextEndsWait(t *testing.T) {
	k := suitekit.Key(t)
	c1, c2 := suitekit.Client(t, s.newBackend), suitekit.Client(t, s.newBackend)
	l := mustAcquire(t, c1, suitekit.CtxT(t, 5*time.Second), k)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	_, err := c2.Acquire(ctx, k)
	if !errors.Is(err, lockx.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire with expiring ctx = %v, want ErrNotAcquired and DeadlineExceeded", err)
	}
	mustRelease(t, l)
}

func (s *suite) testWaitBudget(t *testing.T) {
	k := suitekit.Key(t)
	c1, c2 := suitekit.Client(t, s.newBackend), suitekit.Client(t, s.newBackend)
	l := mustAcquire(t, c1, suitekit.CtxT(t, 5*time.Second), k)
	start := time.Now()
	_, err := c2.Acquire(suitekit.CtxT(t, 10*time.Second), k, lockx.WithWait(150*time.Millisecond))
	if !errors.Is(err, lockx.ErrNotAcquired) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire with wait budget = %v, want ErrNotAcquired only", err)
	}
	if el := time.Since(start); el < 150*time.Millisecond {
		t.Fatalf("gave up after %v, before the 150ms budget", el)
	}
	mustRelease(t, l)
}

func (s *suite) testFairOrder(t *testing.T) {
	k := suitekit.Key(t)
	holder := suitekit.Client(t, s.newBackend)
	opts := []lockx.Option{lockx.Fair(), lockx.WithBackoff(5*time.Millisecond, 50*time.Millisecond)}
	l := mustAcquire(t, holder, suitekit.CtxT(t, 5*time.Second), k, opts...)
	const n = 5
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		queued := make(chan struct{})
		c := lockx.New(&firstRefusal{Backend: s.newBackend(t), refused: queued})
		t.Cleanup(func() { _ = c.Close() })
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			l, err := c.Acquire(suitekit.CtxT(t, 20*time.Second), k, opts...)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			time.Sleep(20 * time.Millisecond)
			_ = l.Release(context.Background())
		}(i)
		select { // waiter i has queued before i+1 starts
		case <-queued:
		case <-time.After(10 * time.Second):
			t.Fatalf("waiter %d made no attempt", i)
		}
	}
	mustRelease(t, l)
	wg.Wait()
	for i := range order {
		if order[i] != i {
			t.Fatalf("grant order %v, want arrival order", order)
		}
	}
	if len(order) != n {
		t.Fatalf("%d grants, want %d", len(order), n)
	}
}

// firstRefusal passes a backend through and closes refused after the first
// refused attempt, so a test knows a fair waiter has taken its place in the
// queue. It forwards Notifier when the wrapped backend has it.
type firstRefusal struct {
	driver.Backend
	refused chan struct{}
	once    sync.Once
}

func (f *firstRefusal) Acquire(ctx context.Context, req driver.Request) (driver.Result, error) {
	r, err := f.Backend.Acquire(ctx, req)
	if err == nil && !r.Acquired {
		f.once.Do(func() { close(f.refused) })
	}
	return r, err
}

func (f *firstRefusal) Watch(ctx context.Context, key string, owner lockx.Owner) (<-chan struct{}, func(), error) {
	var n driver.Notifier
	if driver.As(f.Backend, &n) {
		return n.Watch(ctx, key, owner)
	}
	return nil, nil, errors.ErrUnsupported
}

func (s *suite) testFairCrashedWaiter(t *testing.T) {
	k := suitekit.Key(t)
	holder := suitekit.Client(t, s.newBackend)
	opts := []lockx.Option{lockx.Fair(), lockx.WithQueueTTL(300 * time.Millisecond), lockx.WithBackoff(5*time.Millisecond, 50*time.Millisecond)}
	l := mustAcquire(t, holder, suitekit.CtxT(t, 5*time.Second), k, opts...)
	b := s.newBackend(t)
	t.Cleanup(func() { _ = b.Close() })
	// A waiter that queues once and then crashes: it never refreshes.
	ghost := driver.Request{Key: k, Owner: lockx.NewOwner(), Lease: time.Minute, Fair: true, Wait: true, QueueTTL: 300 * time.Millisecond}
	if r, err := b.Acquire(suitekit.CtxT(t, 5*time.Second), ghost); err != nil || r.Acquired {
		t.Fatalf("ghost attempt: %+v %v", r, err)
	}
	got := make(chan error, 1)
	go func() {
		l2, err := suitekit.Client(t, s.newBackend).Acquire(suitekit.CtxT(t, 10*time.Second), k, opts...)
		if err == nil {
			err = l2.Release(context.Background())
		}
		got <- err
	}()
	time.Sleep(50 * time.Millisecond)
	mustRelease(t, l)
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a crashed fair waiter stalled the queue")
	}
}

func (s *suite) testFairTry(t *testing.T) {
	k := suitekit.Key(t)
	c1, c2 := suitekit.Client(t, s.newBackend), suitekit.Client(t, s.newBackend)
	l := mustAcquire(t, c1, suitekit.CtxT(t, 5*time.Second), k, lockx.Fair())
	if _, err := c2.TryAcquire(suitekit.CtxT(t, 5*time.Second), k, lockx.Fair()); !errors.Is(err, lockx.ErrNotAcquired) {
		t.Fatalf("fair TryAcquire on a held key = %v", err)
	}
	mustRelease(t, l)
	// The refused try must not have left a queue entry that blocks others.
	l2, err := suitekit.Client(t, s.newBackend).TryAcquire(suitekit.CtxT(t, 5*time.Second), k, lockx.Fair())
	if err != nil {
		t.Fatalf("TryAcquire after release: %v (a try left a queue entry?)", err)
	}
	mustRelease(t, l2)
}

func (s *suite) testBadInput(t *testing.T) {
	c := suitekit.Client(t, s.newBackend)
	ctx := suitekit.CtxT(t, 5*time.Second)
	cases := []struct {
		name string
		call func() error
	}{
		{"empty key", func() error { _, err := c.Acquire(ctx, ""); return err }},
		{"long key", func() error { _, err := c.TryAcquire(ctx, strings.Repeat("k", lockx.DefaultMaxKeyLen+1)); return err }},
		{"zero lease", func() error { _, err := c.Acquire(ctx, suitekit.Key(t), lockx.WithLease(0)); return err }},
		{"negative lease", func() error { _, err := c.Acquire(ctx, suitekit.Key(t), lockx.WithLease(-time.Second)); return err }},
		{"negative wait", func() error { _, err := c.Acquire(ctx, suitekit.Key(t), lockx.WithWait(-1)); return err }},
		{"nil fn", func() error { return c.Do(ctx, suitekit.Key(t), nil) }},
		{"bad backoff", func() error { _, err := c.Acquire(ctx, suitekit.Key(t), lockx.WithBackoff(0, 0)); return err }},
	}
	for _, tc := range cases {
		err := tc.call()
		var ae *lockx.ArgError
		if !errors.Is(err, lockx.ErrInvalidArgument) || !errors.As(err, &ae) {
			t.Errorf("%s: err = %v, want *ArgError", tc.name, err)
		}
	}
	l := mustAcquire(t, c, ctx, suitekit.Key(t), lockx.WithLease(time.Second))
	if err := l.Extend(ctx, 0); !errors.Is(err, lockx.ErrInvalidArgument) {
		t.Errorf("Extend(0) = %v, want *ArgError", err)
	}
	if err := l.Extend(ctx, -time.Second); !errors.Is(err, lockx.ErrInvalidArgument) {
		t.Errorf("Extend(-1s) = %v, want *ArgError", err)
	}
	mustRelease(t, l)
	if _, err := c.Acquire(ctx, suitekit.Key(t), lockx.WithMaxKeyLen(4)); !errors.Is(err, lockx.ErrInvalidArgument) {
		t.Errorf("key over WithMaxKeyLen: %v", err)
	}
	closed := suitekit.Client(t, s.newBackend)
	_ = closed.Close()
	if _, err := closed.Acquire(ctx, suitekit.Key(t)); !errors.Is(err, lockx.ErrClosed) {
		t.Errorf("Acquire after Close = %v, want ErrClosed", err)
	}
	if err := closed.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	// A backend closed under a Client (another Client's Close closes its
	// backend) never grants again: Acquire must say so at once, not retry
	// until its context ends. A backend whose Close stops only helpers, its
	// state living on (memlock), may go on granting.
	b := s.newBackend(t)
	_ = b.Close()
	over := lockx.New(b)
	if l, err := over.Acquire(suitekit.CtxT(t, 5*time.Second), suitekit.Key(t)); err == nil {
		mustRelease(t, l)
	} else if !errors.Is(err, lockx.ErrClosed) {
		t.Errorf("Acquire over a closed backend = %v, want ErrClosed (or a grant)", err)
	}
	if err := over.Close(); err != nil {
		t.Errorf("Close of a Client over a closed backend = %v", err)
	}
}

func (s *suite) testDo(t *testing.T) {
	k := suitekit.Key(t)
	c := suitekit.Client(t, s.newBackend)
	var ran bool
	err := c.Do(suitekit.CtxT(t, 5*time.Second), k, func(ctx context.Context) error {
		ran = true
		if _, ok := lockx.OwnerFromContext(ctx); !ok {
			t.Error("fn's context carries no owner")
		}
		expectNotAcquired(t, suitekit.Client(t, s.newBackend), k)
		return nil
	})
	if err != nil || !ran {
		t.Fatalf("Do = %v, ran %v", err, ran)
	}
	l, err := suitekit.Client(t, s.newBackend).TryAcquire(suitekit.CtxT(t, 5*time.Second), k)
	if err != nil {
		t.Fatalf("key still held after Do: %v", err)
	}
	mustRelease(t, l)
	boom := errors.New("boom")
	if err := c.Do(suitekit.CtxT(t, 5*time.Second), k, func(context.Context) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("Do error = %v, want fn's error", err)
	}
}

func (s *suite) testDoLost(t *testing.T) {
	k := suitekit.Key(t)
	c := suitekit.Client(t, s.newBackend)
	err := c.Do(suitekit.CtxT(t, 10*time.Second), k, func(ctx context.Context) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Second):
			return errors.New("fn's context not cancelled on loss")
		}
	}, lockx.WithLease(150*time.Millisecond))
	if !errors.Is(err, lockx.ErrLost) {
		t.Fatalf("Do = %v, want ErrLost", err)
	}
}

// raise sets peak to n if n is greater, with a compare-and-swap: a load
// then a store would let a goroutine holding an older, smaller count
// overwrite a peak of 2 that another had just recorded.
func raise(peak *atomic.Int32, n int32) {
	for m := peak.Load(); n > m && !peak.CompareAndSwap(m, n); m = peak.Load() {
	}
}

func (s *suite) testLocalFirst(t *testing.T) {
	k := suitekit.Key(t)
	c := suitekit.Client(t, s.newBackend, lockx.LocalFirst())
	var inside, maxInside atomic.Int32
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				l, err := c.Acquire(suitekit.CtxT(t, 20*time.Second), k)
				if err != nil {
					t.Error(err)
					return
				}
				raise(&maxInside, inside.Add(1))
				inside.Add(-1)
				if err := l.Release(context.Background()); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if maxInside.Load() != 1 {
		t.Fatalf("%d holders at once", maxInside.Load())
	}
}

func (s *suite) testCloseReleases(t *testing.T) {
	k := suitekit.Key(t)
	c := lockx.New(s.newBackend(t))
	l := mustAcquire(t, c, suitekit.CtxT(t, 5*time.Second), k)
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if !errors.Is(context.Cause(l.Context()), lockx.ErrClosed) {
		t.Fatalf("cause after Close = %v, want ErrClosed", context.Cause(l.Context()))
	}
	l2, err := suitekit.Client(t, s.newBackend).TryAcquire(suitekit.CtxT(t, 5*time.Second), k)
	if err != nil {
		t.Fatalf("key still held after Close: %v", err)
	}
	mustRelease(t, l2)
}

func (s *suite) testTTLAndExtend(t *testing.T) {
	k := suitekit.Key(t)
	c := suitekit.Client(t, s.newBackend)
	ctx := suitekit.CtxT(t, 10*time.Second)
	// The lease, the extension and the pause leave a second or more of
	// slack around each check: under a loaded CI run (race builds of every
	// package at once on two cores) a step here has been seen to stall for
	// about a second.
	const lease = time.Second
	l := mustAcquire(t, c, ctx, k, lockx.WithLease(lease))
	d, err := l.TTL(ctx)
	if err != nil || d <= 0 || d > lease {
		t.Fatalf("TTL = %v, %v", d, err)
	}
	if err := l.Extend(ctx, 5*time.Second); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	time.Sleep(lease + 500*time.Millisecond) // past the first lease
	select {
	case <-l.Lost():
		t.Fatalf("lost despite Extend: %v", context.Cause(l.Context()))
	default:
	}
	expectNotAcquired(t, suitekit.Client(t, s.newBackend), k)
	if d, err := l.TTL(ctx); err != nil || d <= 2*time.Second {
		t.Fatalf("TTL after Extend = %v, %v", d, err)
	}
	mustRelease(t, l)
	if _, err := l.TTL(ctx); !errors.Is(err, lockx.ErrNotHeld) {
		t.Fatalf("TTL after release = %v, want ErrNotHeld", err)
	}
}
