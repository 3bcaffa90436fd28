// Package rwlocktest is the conformance suite of driver.RWBackend, run
// through patterns/rwlock: a backend that serves read/write locks calls
//
//	func TestRWConformance(t *testing.T) {
//		rwlocktest.Run(t, func(t *testing.T) driver.Backend { return mybackend.New(…) })
//	}
//
// newBackend follows lockxtest.Run's contract: every backend it returns
// reaches the same store. The suite lives beside the pattern it exercises,
// so that lockxtest depends on lockx and driver only.
package rwlocktest

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
	"github.com/lockx-go/lockx/patterns/rwlock"
)

type suite struct {
	newBackend func(t *testing.T) driver.Backend
}

// Run runs the read/write lock conformance suite (driver.RWBackend, through
// patterns/rwlock) as subtests of t. newBackend follows lockxtest.Run's
// contract; the backends it returns must implement driver.RWBackend.
func Run(t *testing.T, newBackend func(t *testing.T) driver.Backend) {
	suitekit.Require[driver.RWBackend](t, newBackend)
	s := &suite{newBackend: newBackend}
	suitekit.Parallel(t, []suitekit.Test{
		{Name: "ManyReaders", Fn: s.testRWManyReaders},
		{Name: "WriterExcludes", Fn: s.testRWWriterExcludes},
		{Name: "WriterPreference", Fn: s.testRWWriterPreference},
		{Name: "ReaderPreference", Fn: s.testRWReaderPreference},
		{Name: "NoWriterStarvation", Fn: s.testRWNoStarvation},
		{Name: "ReadersBeforeWriterGoFirst", Fn: s.testRWQueuedReadersFirst},
		{Name: "CrashedReaderExpires", Fn: s.testRWCrashedReader},
		{Name: "WatchdogKeepsReader", Fn: s.testRWWatchdog},
		{Name: "LostWhenTakenAway", Fn: s.testRWLost},
		{Name: "Downgrade", Fn: s.testRWDowngrade},
		{Name: "UpgradeRefused", Fn: s.testRWUpgrade},
		{Name: "NestedReadReenters", Fn: s.testRWNestedRead},
		{Name: "Tokens", Fn: s.testRWTokens},
		{Name: "WakeUp", Fn: s.testRWWakeUp},
		{Name: "OnlyOwnerReleases", Fn: s.testRWOnlyOwner},
		{Name: "Exclusion", Fn: s.testRWExclusion},
		{Name: "CloseReleases", Fn: s.testRWClose},
		{Name: "BadInput", Fn: s.testRWBadInput},
	})
}

func (s *suite) rw(t *testing.T, opts ...rwlock.Option) *rwlock.RW {
	return rwlock.New(suitekit.Client(t, s.newBackend), opts...)
}

// The suite's helpers over lockx.Grant, from suitekit.
var (
	mustGrant    = suitekit.Must[*lockx.Grant]
	releaseGrant = suitekit.Release[*lockx.Grant]
	refused      = suitekit.Refused[*lockx.Grant]
)

func (s *suite) rwBackend(t *testing.T) driver.RWBackend {
	return suitekit.Capability[driver.RWBackend](t, s.newBackend)
}

func (s *suite) testRWManyReaders(t *testing.T) {
	k := suitekit.Key(t)
	ctx := suitekit.CtxT(t, 5*time.Second)
	var held []*lockx.Grant
	for i := 0; i < 5; i++ {
		held = append(held, mustGrant(t)(s.rw(t).TryRLock(ctx, k)))
	}
	for _, g := range held {
		releaseGrant(t, g)
	}
	w := mustGrant(t)(s.rw(t).TryLock(ctx, k))
	releaseGrant(t, w)
}

func (s *suite) testRWWriterExcludes(t *testing.T) {
	k := suitekit.Key(t)
	ctx := suitekit.CtxT(t, 5*time.Second)
	a, b := s.rw(t), s.rw(t)
	w := mustGrant(t)(a.TryLock(ctx, k))
	g, err := b.TryRLock(ctx, k)
	refused(t, "TryRLock under a writer", g, err)
	g, err = b.TryLock(ctx, k)
	refused(t, "TryLock under a writer", g, err)
	releaseGrant(t, w)
	r := mustGrant(t)(b.TryRLock(ctx, k))
	g, err = a.TryLock(ctx, k)
	refused(t, "TryLock under a reader", g, err)
	releaseGrant(t, r)
}

// writerWaiting starts a writer on k in the background and returns the
// channel its grant arrives on; it waits until the writer has queued.
func writerWaiting(t *testing.T, rw *rwlock.RW, k string, opts ...lockx.Option) <-chan *lockx.Grant {
	got := suitekit.Later(t, func() (*lockx.Grant, error) { return rw.Lock(suitekit.CtxT(t, 20*time.Second), k, opts...) })
	time.Sleep(150 * time.Millisecond)
	return got
}

func (s *suite) testRWWriterPreference(t *testing.T) {
	k := suitekit.Key(t)
	ctx := suitekit.CtxT(t, 10*time.Second)
	r := mustGrant(t)(s.rw(t).RLock(ctx, k))
	got := writerWaiting(t, s.rw(t), k, lockx.WithBackoff(5*time.Millisecond, 50*time.Millisecond))
	g, err := s.rw(t).TryRLock(ctx, k)
	refused(t, "a new reader while a writer waits", g, err)
	releaseGrant(t, r)
	suitekit.Served(t, got, releaseGrant, "writer not granted after the last reader left")
}

func (s *suite) testRWReaderPreference(t *testing.T) {
	k := suitekit.Key(t)
	ctx := suitekit.CtxT(t, 10*time.Second)
	r := mustGrant(t)(s.rw(t).RLock(ctx, k))
	got := writerWaiting(t, s.rw(t), k, lockx.WithBackoff(5*time.Millisecond, 50*time.Millisecond))
	r2 := mustGrant(t)(s.rw(t, rwlock.ReaderPreference()).TryRLock(ctx, k))
	releaseGrant(t, r)
	releaseGrant(t, r2)
	suitekit.Served(t, got, releaseGrant, "writer not granted after the readers left")
}

// testRWNoStarvation runs overlapping readers without pause; a writer must
// still get in promptly.
func (s *suite) testRWNoStarvation(t *testing.T) {
	k := suitekit.Key(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	opts := []lockx.Option{lockx.WithBackoff(2*time.Millisecond, 20*time.Millisecond)}
	for i := 0; i < 4; i++ {
		rw := s.rw(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				r, err := rw.RLock(suitekit.CtxT(t, 20*time.Second), k, opts...)
				if err != nil {
					t.Error(err)
					return
				}
				time.Sleep(30 * time.Millisecond)
				_ = r.Release(context.Background())
			}
		}()
	}
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	w, err := s.rw(t).Lock(suitekit.CtxT(t, 10*time.Second), k, append(opts, lockx.WithWait(5*time.Second))...)
	close(stop)
	if err != nil {
		wg.Wait()
		t.Fatalf("writer starved by a steady stream of readers: %v", err)
	}
	t.Logf("writer granted after %v", time.Since(start))
	releaseGrant(t, w)
	wg.Wait()
}

// testRWQueuedReadersFirst: readers queued before a writer enter before it
// (and together), readers arriving after it wait for it.
func (s *suite) testRWQueuedReadersFirst(t *testing.T) {
	k := suitekit.Key(t)
	ctx := suitekit.CtxT(t, 20*time.Second)
	opts := []lockx.Option{lockx.WithBackoff(5*time.Millisecond, 50*time.Millisecond)}
	w0 := mustGrant(t)(s.rw(t).Lock(ctx, k))
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	start := func(name string, write bool) {
		rw := s.rw(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			acq := rw.RLock
			if write {
				acq = rw.Lock
			}
			g, err := acq(ctx, k, opts...)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			time.Sleep(100 * time.Millisecond)
			_ = g.Release(context.Background())
		}()
		time.Sleep(100 * time.Millisecond)
	}
	start("r1", false)
	start("r2", false)
	start("w", true)
	start("r3", false)
	releaseGrant(t, w0)
	wg.Wait()
	if len(order) != 4 || order[2] != "w" || order[3] != "r3" {
		t.Fatalf("grant order %v, want r1 and r2, then w, then r3", order)
	}
}

func (s *suite) testRWCrashedReader(t *testing.T) {
	k := suitekit.Key(t)
	b := s.rwBackend(t)
	ctx := suitekit.CtxT(t, 10*time.Second)
	// A reader that crashed right after its grant: nobody renews its lease.
	res, err := b.AcquireRW(ctx, driver.ModeRead, driver.Request{Key: k, Owner: lockx.NewOwner(), Lease: 300 * time.Millisecond, Fair: true})
	if err != nil || !res.Acquired {
		t.Fatalf("AcquireRW: %+v %v", res, err)
	}
	start := time.Now()
	w, err := s.rw(t).Lock(ctx, k, lockx.WithBackoff(5*time.Millisecond, 50*time.Millisecond), lockx.WithWait(5*time.Second))
	if err != nil {
		t.Fatalf("writer blocked by a crashed reader: %v", err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("writer waited %v for a 300ms reader lease", el)
	}
	releaseGrant(t, w)
}

func (s *suite) testRWWatchdog(t *testing.T) {
	k := suitekit.Key(t)
	ctx := suitekit.CtxT(t, 10*time.Second)
	r := mustGrant(t)(s.rw(t).RLock(ctx, k, lockx.WithWatchdog(time.Second)))
	other := s.rw(t)
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		g, err := other.TryLock(ctx, k)
		refused(t, "TryLock under a renewed reader", g, err)
	}
	select {
	case <-r.Lost():
		t.Fatal("watchdog let the read lease lapse")
	default:
	}
	releaseGrant(t, r)
	if context.Cause(r.Context()) != lockx.ErrReleased {
		t.Fatalf("cause = %v, want ErrReleased", context.Cause(r.Context()))
	}
}

func (s *suite) testRWLost(t *testing.T) {
	k := suitekit.Key(t)
	ctx := suitekit.CtxT(t, 10*time.Second)
	r := mustGrant(t)(s.rw(t).RLock(ctx, k, lockx.WithWatchdog(300*time.Millisecond)))
	if err := s.rwBackend(t).ReleaseRW(ctx, driver.ModeRead, k, r.Owner()); err != nil {
		t.Fatalf("force release: %v", err)
	}
	if !suitekit.ClosedWithin(r.Lost(), 2*time.Second) {
		t.Fatal("Lost did not fire after the read lease was taken away")
	}
	if !errors.Is(context.Cause(r.Context()), lockx.ErrLost) {
		t.Fatalf("cause = %v, want ErrLost", context.Cause(r.Context()))
	}
	if err := r.Release(ctx); !errors.Is(err, lockx.ErrLost) {
		t.Fatalf("Release of a lost read lock = %v, want ErrLost", err)
	}
	w := mustGrant(t)(s.rw(t).RLock(ctx, k, lockx.WithLease(150*time.Millisecond)))
	if !suitekit.ClosedWithin(w.Lost(), 2*time.Second) {
		t.Fatal("explicit read lease did not end")
	}
}

func (s *suite) testRWDowngrade(t *testing.T) {
	k := suitekit.Key(t)
	ctx := suitekit.CtxT(t, 10*time.Second)
	rw := s.rw(t)
	w := mustGrant(t)(rw.Lock(ctx, k))
	// A writer waits; the downgrade must still get the read side at once.
	got := writerWaiting(t, s.rw(t), k, lockx.WithBackoff(5*time.Millisecond, 50*time.Millisecond))
	r, err := rw.Downgrade(ctx, w)
	if err != nil {
		t.Fatalf("Downgrade: %v", err)
	}
	if r.Token() != w.Token() {
		t.Fatalf("downgraded read token %v, want the write's %v", r.Token(), w.Token())
	}
	if context.Cause(w.Context()) != lockx.ErrReleased {
		t.Fatalf("write lock not released by Downgrade: %v", context.Cause(w.Context()))
	}
	select {
	case <-got:
		t.Fatal("a writer got in while the downgraded reader holds")
	case <-time.After(200 * time.Millisecond):
	}
	releaseGrant(t, r)
	suitekit.Served(t, got, releaseGrant, "writer not granted after the downgraded reader left")
}

func (s *suite) testRWUpgrade(t *testing.T) {
	k := suitekit.Key(t)
	ctx := suitekit.CtxT(t, 10*time.Second)
	rw := s.rw(t)
	r := mustGrant(t)(rw.RLock(ctx, k))
	start := time.Now()
	g, err := rw.Lock(r.Context(), k)
	if !errors.Is(err, driver.ErrUpgrade) {
		if g != nil {
			_ = g.Release(ctx)
		}
		t.Fatalf("Lock under a read lock = %v, want ErrUpgrade", err)
	}
	if el := time.Since(start); el > time.Second {
		t.Fatalf("upgrade refused only after %v", el)
	}
	releaseGrant(t, r)
	// The refused upgrade left no trace: a writer gets in at once.
	releaseGrant(t, mustGrant(t)(s.rw(t).TryLock(ctx, k)))
}

func (s *suite) testRWNestedRead(t *testing.T) {
	k := suitekit.Key(t)
	ctx := suitekit.CtxT(t, 10*time.Second)
	rw := s.rw(t)
	r := mustGrant(t)(rw.RLock(ctx, k))
	got := writerWaiting(t, s.rw(t), k, lockx.WithBackoff(5*time.Millisecond, 50*time.Millisecond))
	inner, err := rw.TryRLock(r.Context(), k)
	if err != nil {
		t.Fatalf("nested read under a waiting writer: %v", err)
	}
	if inner.Token() != r.Token() || inner.Owner() != r.Owner() {
		t.Fatal("nested read is not the same hold")
	}
	releaseGrant(t, inner)
	if r.Context().Err() != nil {
		t.Fatal("inner release ended the outer read lock")
	}
	releaseGrant(t, r)
	suitekit.Served(t, got, releaseGrant, "writer not granted")
}

func (s *suite) testRWTokens(t *testing.T) {
	k := suitekit.Key(t)
	ctx := suitekit.CtxT(t, 10*time.Second)
	rw := s.rw(t)
	var last lockx.Token
	for i := 0; i < 3; i++ {
		w := mustGrant(t)(rw.TryLock(ctx, k))
		if w.Token() <= last {
			t.Fatalf("write token %v not above %v", w.Token(), last)
		}
		last = w.Token()
		releaseGrant(t, w)
		r1 := mustGrant(t)(rw.TryRLock(ctx, k))
		r2 := mustGrant(t)(s.rw(t).TryRLock(ctx, k))
		if r1.Token() < last || r2.Token() != r1.Token() {
			t.Fatalf("read tokens %v, %v after write %v: want equal and ≥ it", r1.Token(), r2.Token(), last)
		}
		last = r1.Token()
		releaseGrant(t, r1)
		releaseGrant(t, r2)
	}
}

func (s *suite) testRWWakeUp(t *testing.T) {
	b := s.newBackend(t)
	ok := driver.As(b, new(driver.Notifier))
	_ = b.Close()
	if !ok {
		t.Skip("backend does not implement driver.Notifier")
	}
	opts := []lockx.Option{lockx.WithBackoff(20*time.Second, 20*time.Second), lockx.WithQueueTTL(60 * time.Second)}
	k := suitekit.Key(t)
	ctx := suitekit.CtxT(t, 30*time.Second)
	// A reader waits for a writer, then a writer waits for readers.
	w := mustGrant(t)(s.rw(t).Lock(ctx, k, opts...))
	rgot := make(chan *lockx.Grant, 2)
	for i := 0; i < 2; i++ {
		rw, report := s.rw(t), suitekit.Reporter(t)
		go func() {
			r, err := rw.RLock(ctx, k, opts...)
			if err != nil {
				report(err)
			}
			rgot <- r
		}()
	}
	time.Sleep(200 * time.Millisecond)
	releaseGrant(t, w)
	var readers []*lockx.Grant
	for i := 0; i < 2; i++ {
		select {
		case r := <-rgot:
			if r == nil {
				return
			}
			readers = append(readers, r)
		case <-time.After(5 * time.Second):
			t.Fatal("readers not woken by the writer's release")
		}
	}
	wgot := writerWaiting(t, s.rw(t), k, opts...)
	for _, r := range readers {
		releaseGrant(t, r)
	}
	suitekit.Served(t, wgot, releaseGrant, "writer not woken by the last reader's release")
}

func (s *suite) testRWOnlyOwner(t *testing.T) {
	k := suitekit.Key(t)
	ctx := suitekit.CtxT(t, 10*time.Second)
	b := s.rwBackend(t)
	r := mustGrant(t)(s.rw(t).RLock(ctx, k))
	w := mustGrant(t)(s.rw(t).Lock(ctx, k+"w"))
	stranger := lockx.NewOwner()
	for _, m := range []driver.RWMode{driver.ModeRead, driver.ModeWrite} {
		for _, kk := range []string{k, k + "w"} {
			if err := b.ReleaseRW(ctx, m, kk, stranger); !errors.Is(err, lockx.ErrNotHeld) {
				t.Fatalf("stranger's ReleaseRW(%v) = %v, want ErrNotHeld", m, err)
			}
			if err := b.ExtendRW(ctx, m, kk, stranger, time.Second); !errors.Is(err, lockx.ErrNotHeld) {
				t.Fatalf("stranger's ExtendRW(%v) = %v, want ErrNotHeld", m, err)
			}
		}
	}
	// The wrong side of one's own hold is not held either.
	if err := b.ReleaseRW(ctx, driver.ModeWrite, k, r.Owner()); !errors.Is(err, lockx.ErrNotHeld) {
		t.Fatalf("ReleaseRW(write) by a reader = %v, want ErrNotHeld", err)
	}
	g, err := s.rw(t).TryLock(ctx, k)
	refused(t, "TryLock after strangers' releases", g, err)
	releaseGrant(t, r)
	releaseGrant(t, w)
	if err := r.Release(ctx); !errors.Is(err, lockx.ErrNotHeld) {
		t.Fatalf("second Release = %v, want ErrNotHeld", err)
	}
}

// testRWExclusion hammers one key from several clients and checks the
// invariant at every grant: one writer and nobody else, or only readers.
func (s *suite) testRWExclusion(t *testing.T) {
	k := suitekit.Key(t)
	var readers, writers, maxReaders atomic.Int64
	var wg sync.WaitGroup
	opts := []lockx.Option{lockx.WithBackoff(time.Millisecond, 20*time.Millisecond)}
	for i := 0; i < 4; i++ {
		rw := s.rw(t)
		for j := 0; j < 3; j++ {
			wg.Add(1)
			go func(write bool) {
				defer wg.Done()
				for n := 0; n < 8; n++ {
					ctx := suitekit.CtxT(t, 30*time.Second)
					if write {
						w, err := rw.Lock(ctx, k, opts...)
						if err != nil {
							t.Error(err)
							return
						}
						if writers.Add(1) != 1 || readers.Load() != 0 {
							t.Error("writer admitted with another holder")
						}
						time.Sleep(2 * time.Millisecond)
						writers.Add(-1)
						_ = w.Release(context.Background())
						continue
					}
					r, err := rw.RLock(ctx, k, opts...)
					if err != nil {
						t.Error(err)
						return
					}
					n := readers.Add(1)
					if writers.Load() != 0 {
						t.Error("reader admitted with a writer")
					}
					for m := maxReaders.Load(); n > m && !maxReaders.CompareAndSwap(m, n); m = maxReaders.Load() {
					}
					time.Sleep(3 * time.Millisecond)
					readers.Add(-1)
					_ = r.Release(context.Background())
				}
			}(j == 0)
		}
	}
	wg.Wait()
	t.Logf("up to %d readers at once", maxReaders.Load())
}

func (s *suite) testRWClose(t *testing.T) {
	k := suitekit.Key(t)
	ctx := suitekit.CtxT(t, 10*time.Second)
	c := lockx.New(s.newBackend(t))
	r := mustGrant(t)(rwlock.New(c).RLock(ctx, k))
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if !suitekit.ClosedWithin(r.Context().Done(), 2*time.Second) {
		t.Fatal("read lock's context not cancelled by Close")
	}
	if context.Cause(r.Context()) != lockx.ErrClosed {
		t.Fatalf("cause = %v, want ErrClosed", context.Cause(r.Context()))
	}
	w, err := s.rw(t).Lock(ctx, k, lockx.WithWait(2*time.Second), lockx.WithBackoff(5*time.Millisecond, 50*time.Millisecond))
	if err != nil {
		t.Fatalf("Close did not free the read lock: %v", err)
	}
	releaseGrant(t, w)
	if _, err := rwlock.New(c).TryRLock(ctx, k); !errors.Is(err, lockx.ErrClosed) {
		t.Fatalf("RLock after Close = %v, want ErrClosed", err)
	}
}

func (s *suite) testRWBadInput(t *testing.T) {
	ctx := suitekit.CtxT(t, 5*time.Second)
	rw := s.rw(t)
	cases := []struct {
		name string
		call func() error
	}{
		{"empty key", func() error { _, err := rw.RLock(ctx, ""); return err }},
		{"empty key write", func() error { _, err := rw.TryLock(ctx, ""); return err }},
		{"zero lease", func() error { _, err := rw.RLock(ctx, suitekit.Key(t), lockx.WithLease(0)); return err }},
		{"nil client", func() error { _, err := rwlock.New(nil).RLock(ctx, suitekit.Key(t)); return err }},
		{"bad mode", func() error {
			_, err := s.rwBackend(t).AcquireRW(ctx, 0, driver.Request{Key: suitekit.Key(t), Owner: lockx.NewOwner(), Lease: time.Second})
			return err
		}},
	}
	for _, tc := range cases {
		var ae *lockx.ArgError
		if err := tc.call(); !errors.Is(err, lockx.ErrInvalidArgument) || !errors.As(err, &ae) {
			t.Errorf("%s: err = %v, want *ArgError", tc.name, err)
		}
	}
	var nilGrant *lockx.Grant
	if err := nilGrant.Release(ctx); !errors.Is(err, lockx.ErrNotHeld) {
		t.Errorf("nil Grant Release = %v", err)
	}
}
