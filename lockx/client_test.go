package lockx_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/memlock"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// flaky wraps the in-process backend and injects transport failures, to
// check what the client does when the outcome of a call is unknown.
type flaky struct {
	*memlock.Backend
	failAcquire   atomic.Int32 // fail the next n acquires before (or after, see lateAcquire) applying them
	lateAcquire   bool         // apply the acquire, then report failure (a lost reply)
	failRelease   atomic.Int32
	lateRelease   bool
	failExtend    atomic.Bool
	extendBatches atomic.Int32 // ExtendMany calls started
	extendCalls   atomic.Int32

	mu    sync.Mutex
	sizes []int         // the size of every ExtendMany call, recorded when it starts
	gate  chan struct{} // if set, ExtendMany waits for it to close before it renews
}

var errWire = errors.New("i/o timeout")

func (f *flaky) Acquire(ctx context.Context, req driver.Request) (driver.Result, error) {
	if f.failAcquire.Add(-1) >= 0 {
		if f.lateAcquire {
			_, _ = f.Backend.Acquire(ctx, req)
		}
		return driver.Result{}, driver.Unavailable("acquire", errWire)
	}
	return f.Backend.Acquire(ctx, req)
}

func (f *flaky) Release(ctx context.Context, key string, owner lockx.Owner) error {
	if f.failRelease.Add(-1) >= 0 {
		if f.lateRelease {
			_ = f.Backend.Release(ctx, key, owner)
		}
		return driver.Unavailable("release", errWire)
	}
	return f.Backend.Release(ctx, key, owner)
}

func (f *flaky) Extend(ctx context.Context, key string, owner lockx.Owner, lease time.Duration) error {
	f.extendCalls.Add(1)
	if f.failExtend.Load() {
		return driver.Unavailable("extend", errWire)
	}
	return f.Backend.Extend(ctx, key, owner, lease)
}

// ExtendMany makes flaky a BatchExtender, so the watchdog's batching shows.
func (f *flaky) ExtendMany(ctx context.Context, reqs []driver.ExtendRequest) []error {
	f.mu.Lock()
	f.sizes = append(f.sizes, len(reqs))
	gate := f.gate
	f.mu.Unlock()
	f.extendBatches.Add(1)
	if gate != nil {
		<-gate
	}
	errs := make([]error, len(reqs))
	for i, r := range reqs {
		errs[i] = f.Extend(ctx, r.Key, r.Owner, r.Lease)
	}
	return errs
}

// batchSizes returns the sizes of the ExtendMany calls started so far, in
// order: unlike two counters read one after the other, it never sees half
// of a batch that is still running, nor counts one that started earlier.
func (f *flaky) batchSizes() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int(nil), f.sizes...)
}

func newFlaky() *flaky { return &flaky{Backend: memlock.New()} }

func TestUnavailableFailsClosed(t *testing.T) {
	f := newFlaky()
	f.failAcquire.Store(1 << 20)
	c := lockx.New(f)
	defer c.Close()
	_, err := c.TryAcquire(context.Background(), "k")
	if !errors.Is(err, lockx.ErrUnavailable) || !errors.Is(err, errWire) {
		t.Fatalf("TryAcquire on a failing backend = %v, want ErrUnavailable wrapping the cause", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = c.Acquire(ctx, "k", lockx.WithBackoff(5*time.Millisecond, 20*time.Millisecond))
	if !errors.Is(err, lockx.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, lockx.ErrUnavailable) {
		t.Fatalf("Acquire on a failing backend = %v, want NotAcquired + deadline + last error", err)
	}
}

func TestAcquireRetriesAfterLostReply(t *testing.T) {
	f := newFlaky()
	f.lateAcquire = true
	f.failAcquire.Store(2) // granted on the server, but the client heard nothing — twice
	c := lockx.New(f)
	defer c.Close()
	l, err := c.Acquire(context.Background(), "k", lockx.WithBackoff(time.Millisecond, 5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	// The retries re-granted to the same owner: one release must free it.
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	l2, err := lockx.New(f.Backend).TryAcquire(context.Background(), "k")
	if err != nil {
		t.Fatalf("key still held after one release: %v (acquire retries double-counted)", err)
	}
	_ = l2.Release(context.Background())
}

func TestTryAcquireCleansUpAfterLostReply(t *testing.T) {
	f := newFlaky()
	f.lateAcquire = true
	f.failAcquire.Store(1)
	c := lockx.New(f)
	defer c.Close()
	if _, err := c.TryAcquire(context.Background(), "k"); !errors.Is(err, lockx.ErrUnavailable) {
		t.Fatalf("err = %v", err)
	}
	// The grant that happened behind the lost reply was withdrawn.
	l, err := c.TryAcquire(context.Background(), "k")
	if err != nil {
		t.Fatalf("key left held by a failed TryAcquire: %v", err)
	}
	_ = l.Release(context.Background())
}

func TestReleaseRetriesAfterLostReply(t *testing.T) {
	f := newFlaky()
	f.lateRelease = true
	f.failRelease.Store(1) // released on the server, reply lost
	c := lockx.New(f)
	defer c.Close()
	l, err := c.Acquire(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatalf("Release after lost reply = %v, want nil (the retry's not-held means done)", err)
	}
}

func TestWatchdogBatchesRenewals(t *testing.T) {
	f := newFlaky()
	c := lockx.New(f, lockx.WithWatchdog(300*time.Millisecond))
	defer c.Close()
	var locks []*lockx.Lock
	for i := 0; i < 20; i++ {
		l, err := c.Acquire(context.Background(), "k"+strings.Repeat("x", i))
		if err != nil {
			t.Fatal(err)
		}
		locks = append(locks, l)
	}
	time.Sleep(700 * time.Millisecond)
	calls, batches := f.extendCalls.Load(), f.extendBatches.Load()
	if calls < 20 {
		t.Fatalf("%d renewals for 20 locks over 2+ renewal periods", calls)
	}
	if batches*4 > calls {
		t.Fatalf("%d batches for %d renewals: not batched", batches, calls)
	}
	for _, l := range locks {
		if err := l.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	// A round trip collected before the releases may start a moment after
	// them; none may start later.
	time.Sleep(50 * time.Millisecond)
	before := f.extendBatches.Load()
	time.Sleep(300 * time.Millisecond)
	if after := f.extendBatches.Load(); after != before {
		t.Fatalf("%d renewal batches after every lock was released", after-before)
	}
}

// shortGrant grants with a TTL below the lease asked for, as a fair
// handoff of redislock does (the queue entry's lease, at most the queue TTL).
type shortGrant struct {
	*flaky
	ttl time.Duration
}

func (s shortGrant) Acquire(ctx context.Context, req driver.Request) (driver.Result, error) {
	res, err := s.flaky.Acquire(ctx, req)
	if res.Acquired && s.ttl < req.Lease {
		res.TTL = s.ttl
	}
	return res, err
}

// TestWatchdogShortGrantOnItsOwnSchedule: a grant that carries less than
// the lease is renewed a third into its own validity, like any lease, not
// at once: its window was once a twelfth of the full lease, more than a
// third of a short grant's validity, so every such grant was renewed right
// after it was taken (an extra round trip per hot-key handoff held for
// more than a moment). It is renewed in time all the same.
func TestWatchdogShortGrantOnItsOwnSchedule(t *testing.T) {
	f := newFlaky()
	c := lockx.New(shortGrant{flaky: f, ttl: 2 * time.Second})
	defer c.Close()
	ctx := context.Background()
	l, err := c.Acquire(ctx, "handed", lockx.WithWatchdog(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if n := f.extendCalls.Load(); n != 0 {
		t.Fatalf("a 2 s grant of a 30 s lease was renewed %d times within 100 ms", n)
	}
	for deadline := time.Now().Add(1900 * time.Millisecond); f.extendCalls.Load() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a 2 s grant was not renewed within 1.9 s")
		}
	}
	select {
	case <-l.Lost():
		t.Fatal("the short grant was lost")
	default:
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestWatchdogLingers: the watchdog's goroutine outlives the last lock it
// renews for a while, so that a client taking and freeing locks in turn (a
// hot key's waiter) does not start a goroutine for every lock; once it has
// found no lock for that long, the goroutine ends.
func TestWatchdogLingers(t *testing.T) {
	c := lockx.New(memlock.New())
	defer c.Close()
	lockx.SetWatchdogLinger(c, 10*time.Second)
	ctx := context.Background()
	for i := 0; i < 20; i++ {
		l, err := c.Acquire(ctx, "turns")
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		// Long enough for the loop to run and find no lock to renew.
		time.Sleep(5 * time.Millisecond)
	}
	if n := lockx.WatchdogStarts(c); n != 1 {
		t.Fatalf("20 locks in turn started the watchdog goroutine %d times, want 1", n)
	}
	// A short lease, so that the loop wakes soon after its release.
	lockx.SetWatchdogLinger(c, 20*time.Millisecond)
	l, err := c.Acquire(ctx, "last", lockx.WithWatchdog(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); lockx.WatchdogRunning(c); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the watchdog goroutine still runs 5 s after its last lock (linger 20 ms)")
		}
	}
}

// TestWatchdogWokenOnlyForEarlierRenewals: a lock whose renewal falls after
// the watchdog's next wake-up does not wake it (a wake-up per Acquire was a
// goroutine switch on every hot-key handoff); a lock due earlier does, and
// is renewed in time.
func TestWatchdogWokenOnlyForEarlierRenewals(t *testing.T) {
	f := newFlaky()
	c := lockx.New(f)
	defer c.Close()
	ctx := context.Background()
	first, err := c.Acquire(ctx, "first", lockx.WithWatchdog(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); !lockx.WatchdogAsleep(c); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the watchdog loop never went to sleep")
		}
	}
	base := lockx.WatchdogKicks(c)
	for i := 0; i < 200; i++ {
		l, err := c.Acquire(ctx, fmt.Sprintf("later-%d", i), lockx.WithWatchdog(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := lockx.WatchdogKicks(c) - base; n > 0 {
		t.Fatalf("200 locks renewed after the first woke the watchdog %d times", n)
	}
	short, err := c.Acquire(ctx, "short", lockx.WithWatchdog(600*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1300 * time.Millisecond) // past two leases: renewed, or lost
	if n := lockx.WatchdogKicks(c) - base; n == 0 {
		t.Fatal("a lock due before the watchdog's wake-up did not wake it")
	}
	select {
	case <-short.Lost():
		t.Fatal("the short lease was not renewed")
	default:
	}
	if f.extendCalls.Load() == 0 {
		t.Fatal("no renewal of the short lease")
	}
	for _, l := range []*lockx.Lock{short, first} {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWatchdogBatchesSpreadRenewals: locks taken a few milliseconds apart
// (well within the batch window, lease/12) are renewed in one batch per
// period, not one batch each.
func TestWatchdogBatchesSpreadRenewals(t *testing.T) {
	f := newFlaky()
	c := lockx.New(f, lockx.WithWatchdog(1200*time.Millisecond)) // renewals every ~300–400 ms, window 100 ms
	defer c.Close()
	var locks []*lockx.Lock
	for i := range 10 {
		l, err := c.Acquire(context.Background(), fmt.Sprint("spread", i))
		if err != nil {
			t.Fatal(err)
		}
		locks = append(locks, l)
		time.Sleep(4 * time.Millisecond)
	}
	time.Sleep(time.Second)
	calls, batches := f.extendCalls.Load(), f.extendBatches.Load()
	if calls < 20 {
		t.Fatalf("%d renewals for 10 locks over 2+ renewal periods", calls)
	}
	if batches*5 > calls {
		t.Fatalf("%d batches for %d renewals of 10 locks taken 4 ms apart: not batched", batches, calls)
	}
	for _, l := range locks {
		if err := l.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFailingRenewalSignalsLossBeforeExpiry(t *testing.T) {
	f := newFlaky()
	c := lockx.New(f)
	defer c.Close()
	lease := 300 * time.Millisecond
	start := time.Now()
	l, err := c.Acquire(context.Background(), "k", lockx.WithWatchdog(lease))
	if err != nil {
		t.Fatal(err)
	}
	f.failExtend.Store(true)
	select {
	case <-l.Lost():
	case <-time.After(2 * time.Second):
		t.Fatal("Lost did not fire while renewals failed")
	}
	// The holder must learn before the backend's lease could have ended:
	// lease − drift after the grant at the latest (the first renewal was the
	// last to succeed, at lease/3 at best, so no later than that + lease).
	if el := time.Since(start); el > 2*lease {
		t.Fatalf("loss signalled after %v", el)
	}
	if !errors.Is(context.Cause(l.Context()), lockx.ErrLost) {
		t.Fatalf("cause %v", context.Cause(l.Context()))
	}
	// And the server-side lease was indeed still running when we gave up.
	_ = l.Release(context.Background())
}

func TestLostBeforeServerExpiry(t *testing.T) {
	// With an explicit lease, the local validity (lease − drift) ends before
	// the backend lease: when Lost fires, the lock is still ours on the
	// backend, so no other owner can have written yet.
	b := memlock.New()
	c := lockx.New(b)
	defer c.Close()
	// A generous drift allowance keeps the check meaningful on a loaded
	// machine, where the local timer itself may fire late.
	l, err := c.Acquire(context.Background(), "k", lockx.WithLease(500*time.Millisecond), lockx.WithDrift(0.3, 0))
	if err != nil {
		t.Fatal(err)
	}
	<-l.Lost()
	if _, err := b.TTL(context.Background(), "k", l.Owner()); err != nil {
		t.Fatalf("lock already expired on the backend when Lost fired: %v", err)
	}
}

func TestReentrantConcurrentRelease(t *testing.T) {
	c := lockx.New(memlock.New())
	defer c.Close()
	ctx := lockx.ContextWithOwner(context.Background(), lockx.NewOwner())
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				l, err := c.Acquire(ctx, "k")
				if err != nil {
					t.Error(err)
					return
				}
				if err := l.Release(context.Background()); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	other, err := c.TryAcquire(context.Background(), "k")
	if err != nil {
		t.Fatalf("key left held: %v", err)
	}
	_ = other.Release(context.Background())
}

// slowRelease holds every Release until unblock is closed, and closes
// started when the first one arrives.
type slowRelease struct {
	*memlock.Backend
	once    sync.Once
	started chan struct{}
	unblock chan struct{}
}

func (s *slowRelease) Release(ctx context.Context, key string, owner lockx.Owner) error {
	s.once.Do(func() { close(s.started) })
	<-s.unblock
	return s.Backend.Release(ctx, key, owner)
}

// An acquisition by the owner whose final release of the key is in flight
// waits for that release to end, then takes the key afresh: it neither
// re-enters the hold being released nor waits for ever.
func TestAcquireWaitsOutOwnRelease(t *testing.T) {
	b := &slowRelease{Backend: memlock.New(), started: make(chan struct{}), unblock: make(chan struct{})}
	c := lockx.New(b)
	defer c.Close()
	ctx := lockx.ContextWithOwner(context.Background(), lockx.NewOwner())
	l, err := c.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	released := make(chan error, 1)
	go func() { released <- l.Release(context.Background()) }()
	<-b.started
	type result struct {
		l   *lockx.Lock
		err error
	}
	got := make(chan result, 1)
	go func() {
		l2, err := c.Acquire(ctx, "k")
		got <- result{l2, err}
	}()
	select {
	case r := <-got:
		t.Fatalf("acquired during the owner's release in flight: %v, %v", r.l, r.err)
	case <-time.After(50 * time.Millisecond):
	}
	close(b.unblock)
	if err := <-released; err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.l.Token() <= l.Token() {
			t.Fatalf("token %d after %d: the released hold was re-entered", r.l.Token(), l.Token())
		}
		if err := r.l.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the acquisition still waits after the release ended")
	}
}

func TestErrorMessages(t *testing.T) {
	c := lockx.New(memlock.New())
	defer c.Close()
	_, err := c.Acquire(context.Background(), "")
	if got := err.Error(); got != `lockx: acquire "": invalid key: empty` {
		t.Fatalf("message %q", got)
	}
	var ke *lockx.KeyError
	if !errors.As(err, &ke) || ke.Op != "acquire" {
		t.Fatalf("not a *KeyError: %v", err)
	}
	if lockx.New(nil).Close() != nil {
		t.Fatal("Close of a client over a nil backend")
	}
	if _, err := lockx.New(nil).TryAcquire(context.Background(), "k"); !errors.Is(err, lockx.ErrInvalidArgument) {
		t.Fatalf("nil backend: %v", err)
	}
}

// partitioned is a BatchExtender and ExtendPartitioner over flaky: keys
// starting with "slow" form a group of their own (a stalled node), and a
// batch that holds one waits until its context ends. bad returns a result
// that is no partition.
type partitioned struct {
	*flaky
	bad bool
}

func (p *partitioned) PartitionExtends(ctx context.Context, reqs []driver.ExtendRequest) [][]int {
	if p.bad {
		return [][]int{{0, 0}}
	}
	var slow, fast []int
	for i, r := range reqs {
		if strings.HasPrefix(r.Key, "slow") {
			slow = append(slow, i)
		} else {
			fast = append(fast, i)
		}
	}
	var groups [][]int
	for _, g := range [][]int{slow, fast} {
		if len(g) > 0 {
			groups = append(groups, g)
		}
	}
	return groups
}

func (p *partitioned) ExtendMany(ctx context.Context, reqs []driver.ExtendRequest) []error {
	for _, r := range reqs {
		if strings.HasPrefix(r.Key, "slow") {
			<-ctx.Done()
			errs := make([]error, len(reqs))
			for i := range errs {
				errs[i] = driver.Unavailable("extend", ctx.Err())
			}
			return errs
		}
	}
	return p.flaky.ExtendMany(ctx, reqs)
}

// TestWatchdogGroupStallStaysInGroup: with an ExtendPartitioner, a renewal
// group that stalls past its locks' validity loses only its own locks; the
// other groups go on being renewed, period after period. A result that is
// not a partition makes one batch, and then the stall takes every lock.
func TestWatchdogGroupStallStaysInGroup(t *testing.T) {
	for _, bad := range []bool{false, true} {
		t.Run(fmt.Sprintf("bad=%t", bad), func(t *testing.T) {
			p := &partitioned{flaky: newFlaky(), bad: bad}
			const lease = 300 * time.Millisecond
			c := lockx.New(p, lockx.WithWatchdog(lease))
			defer c.Close()
			ctx := context.Background()
			slow, err := c.Acquire(ctx, "slow")
			if err != nil {
				t.Fatal(err)
			}
			var fast []*lockx.Lock
			for i := range 3 {
				l, err := c.Acquire(ctx, fmt.Sprintf("fast%d", i))
				if err != nil {
					t.Fatal(err)
				}
				fast = append(fast, l)
			}
			select {
			case <-slow.Lost():
			case <-time.After(10 * lease):
				t.Fatal("the stalled group's lock was not lost")
			}
			time.Sleep(2 * lease)
			for _, l := range fast {
				select {
				case <-l.Lost():
					if !bad {
						t.Errorf("%s lost: the stalled group held up its renewal", l.Key())
					}
				default:
					if bad {
						t.Errorf("%s held with one batch and a stall longer than its validity", l.Key())
					}
				}
				_ = l.Release(ctx)
			}
		})
	}
}
