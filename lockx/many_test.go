package lockx_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/memlock"
)

// TestAcquireManyRenewsInOneBatch: a set gathered over a span longer than
// the watchdog's batching window (lease/12) is renewed in one round trip
// per period: its members' schedules are aligned when the set is complete.
func TestAcquireManyRenewsInOneBatch(t *testing.T) {
	f := newFlaky()
	// Renewals every ~200 ms, window 50 ms: a member busy for 75 ms spreads
	// the grants over more than the window and ends well before the first
	// renewal is due (100 ms).
	testManyRenewals(t, f, 600*time.Millisecond, 75*time.Millisecond, nil)
}

// TestAcquireManyAlignsAroundInflightRenewal: a set gathered over more than
// lease/3 has its first members renewed while it is still gathering; that
// renewal is still out when the set is complete (its round trip is held
// until then). The members taken last must join the renewal schedule that
// call will set, not the stale one, or they would be renewed in a round
// trip of their own, and the set split for good.
func TestAcquireManyAlignsAroundInflightRenewal(t *testing.T) {
	f := newFlaky()
	gate := make(chan struct{})
	f.gate = gate
	// Renewals every ~100 ms, first due at 50 ms; the busy member is free
	// after 80 ms.
	testManyRenewals(t, f, 300*time.Millisecond, 80*time.Millisecond, func() {
		f.mu.Lock()
		f.gate = nil
		f.mu.Unlock()
		close(gate)
	})
}

// testManyRenewals takes a set of 10 keys with a client of watchdog lease
// lease while one member is busy for busy, calls gathered (if not nil) once
// the set is held, and then checks that every renewal round trip started
// over the next two periods carries all 10 members, and that none starts
// after the set is released.
func testManyRenewals(t *testing.T, f *flaky, lease, busy time.Duration, gathered func()) {
	t.Helper()
	c := lockx.New(f, lockx.WithWatchdog(lease))
	defer c.Close()
	keys := make([]string, 10)
	for i := range keys {
		keys[i] = fmt.Sprintf("set:%d", i)
	}
	other := lockx.New(f.Backend)
	defer other.Close()
	held, err := other.Acquire(context.Background(), keys[7])
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(busy, func() { _ = held.Release(context.Background()) })
	ls, err := c.AcquireMany(context.Background(), keys, lockx.WithBackoff(5*time.Millisecond, 10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	// Round trips started before this point may have carried only the
	// members held by then.
	n0 := len(f.batchSizes())
	if gathered != nil {
		gathered()
	}
	time.Sleep(2*lease + lease/3)
	sizes := f.batchSizes()[n0:]
	if len(sizes) < 2 {
		t.Fatalf("%d renewal batches over 2+ periods", len(sizes))
	}
	for _, n := range sizes {
		if n != 10 {
			t.Fatalf("renewal batches of %v: want all 10 members in every one", sizes)
		}
	}
	if err := ls.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A round trip collected before the release may start a moment after
	// it; none may start later.
	time.Sleep(lease / 4)
	before := f.extendBatches.Load()
	time.Sleep(lease)
	if after := f.extendBatches.Load(); after != before {
		t.Fatalf("%d renewal batches after the set was released", after-before)
	}
}

// manyBackend adds ManyAcquirer to flaky, granting all or nothing over the
// in-process backend, and counts the calls of both paths.
type manyBackend struct {
	*flaky
	batches     atomic.Int32
	singles     atomic.Int32
	failBatches atomic.Int32 // apply the next n batches, then report a failure
}

func (m *manyBackend) Acquire(ctx context.Context, req driver.Request) (driver.Result, error) {
	m.singles.Add(1)
	return m.flaky.Acquire(ctx, req)
}

func (m *manyBackend) AcquireMany(ctx context.Context, reqs []driver.Request) ([]driver.Result, error) {
	m.batches.Add(1)
	res := make([]driver.Result, len(reqs))
	for i, r := range reqs {
		got, err := m.flaky.Backend.Acquire(ctx, r)
		if err != nil || !got.Acquired {
			for _, taken := range reqs[:i] {
				_ = m.flaky.Backend.Release(ctx, taken.Key, taken.Owner)
			}
			res[i] = got
			return res, err
		}
		res[i] = got
	}
	if m.failBatches.Add(-1) >= 0 {
		return nil, driver.Unavailable("acquire many", errWire)
	}
	return res, nil
}

func TestAcquireManyUsesManyAcquirer(t *testing.T) {
	m := &manyBackend{flaky: newFlaky()}
	c := lockx.New(m)
	defer c.Close()
	ctx := context.Background()
	keys := []string{"b", "a", "c", "d"}

	ls, err := c.TryAcquireMany(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	if b, s := m.batches.Load(), m.singles.Load(); b != 1 || s != 0 {
		t.Fatalf("uncontended set: %d batch and %d single attempts, want 1 and 0", b, s)
	}
	for _, k := range ls.Keys() {
		if ls.Token(k) == 0 {
			t.Fatalf("no token for %q", k)
		}
	}
	if err := ls.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// A refused batch falls back to waiting key by key.
	other := lockx.New(m.flaky.Backend)
	defer other.Close()
	busy, err := other.Acquire(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(50*time.Millisecond, func() { _ = busy.Release(context.Background()) })
	ls, err = c.AcquireMany(ctx, keys, lockx.WithBackoff(5*time.Millisecond, 10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if m.singles.Load() == 0 {
		t.Fatal("refused batch did not fall back to single attempts")
	}
	if err := ls.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// A batch whose outcome is unknown is released and retried key by key:
	// nothing stays held by the abandoned attempt.
	m.failBatches.Store(1)
	ls, err = c.AcquireMany(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	if err := ls.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		l, err := other.TryAcquire(ctx, k)
		if err != nil {
			t.Fatalf("%q left held: %v", k, err)
		}
		_ = l.Release(ctx)
	}

	// An owner in the context (reentrancy) takes the key-by-key path.
	b0 := m.batches.Load()
	l, err := c.Acquire(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	ls, err = c.AcquireMany(l.Context(), keys)
	if err != nil {
		t.Fatal(err)
	}
	if m.batches.Load() != b0 || ls.Token("a") != l.Token() {
		t.Fatal("set under an owner's context did not re-enter key by key")
	}
	_ = ls.Release(ctx)
	_ = l.Release(ctx)
}

func TestAcquireManyClosedClient(t *testing.T) {
	c := lockx.New(memlock.New())
	_ = c.Close()
	if _, err := c.AcquireMany(context.Background(), []string{"a"}); !errors.Is(err, lockx.ErrClosed) {
		t.Fatalf("AcquireMany after Close = %v, want ErrClosed", err)
	}
}

func TestAcquireManyClientMaxKeys(t *testing.T) {
	c := lockx.New(memlock.New(), lockx.WithMaxKeys(2))
	defer c.Close()
	ctx := context.Background()
	if _, err := c.AcquireMany(ctx, []string{"a", "b", "c"}); !errors.Is(err, lockx.ErrInvalidArgument) {
		t.Fatalf("3 keys over a client max of 2: %v", err)
	}
	// A per-call option overrides the client's.
	ls, err := c.AcquireMany(ctx, []string{"a", "b", "c"}, lockx.WithMaxKeys(3))
	if err != nil {
		t.Fatal(err)
	}
	_ = ls.Release(ctx)
	// Duplicates count once.
	ls, err = c.AcquireMany(ctx, []string{"a", "b", "a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	_ = ls.Release(ctx)
}

func TestLockSetClientClose(t *testing.T) {
	c := lockx.New(memlock.New())
	ls, err := c.AcquireMany(context.Background(), []string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	<-ls.Context().Done()
	if !errors.Is(context.Cause(ls.Context()), lockx.ErrClosed) {
		t.Fatalf("cause %v, want ErrClosed", context.Cause(ls.Context()))
	}
}

func ExampleClient_AcquireMany() {
	locks := lockx.New(memlock.New())
	defer locks.Close()
	ctx := context.Background()

	// A transfer locks both accounts. Keys are taken in sorted order, so a
	// transfer the other way round cannot deadlock with this one.
	set, err := locks.AcquireMany(ctx, []string{"account:B", "account:A"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer set.Release(ctx)
	fmt.Println(set.Keys())
	fmt.Println(set.Token("account:A") > 0, set.Token("account:B") > 0)

	// Every member is held: a set overlapping it is refused as a whole.
	_, err = locks.TryAcquireMany(ctx, []string{"account:C", "account:B"})
	fmt.Println(errors.Is(err, lockx.ErrNotAcquired))
	// Output:
	// [account:A account:B]
	// true true
	// true
}

// manyReleaser adds ManyReleaser to flaky and counts both release paths.
// If lostReply names a key, ReleaseMany releases it but reports the outcome
// unknown, as a lost reply would.
type manyReleaser struct {
	*flaky
	calls, batched, singles atomic.Int32
	lostReply               string
}

func (m *manyReleaser) Release(ctx context.Context, key string, owner lockx.Owner) error {
	m.singles.Add(1)
	return m.flaky.Release(ctx, key, owner)
}

func (m *manyReleaser) ReleaseMany(ctx context.Context, keys []string, owner lockx.Owner) []error {
	m.calls.Add(1)
	errs := make([]error, len(keys))
	for i, k := range keys {
		m.batched.Add(1)
		errs[i] = m.flaky.Backend.Release(ctx, k, owner)
		if k == m.lostReply {
			errs[i] = driver.Unavailable("release", errWire)
		}
	}
	return errs
}

func TestLockSetReleaseUsesManyReleaser(t *testing.T) {
	m := &manyReleaser{flaky: newFlaky()}
	c := lockx.New(m)
	defer c.Close()
	other := lockx.New(m.flaky.Backend)
	defer other.Close()
	ctx := context.Background()
	ks := []string{"mr:a", "mr:b", "mr:c", "mr:d"}
	free := func() {
		t.Helper()
		for _, k := range ks {
			l, err := other.TryAcquire(ctx, k)
			if err != nil {
				t.Fatalf("%s after the set's release: %v", k, err)
			}
			_ = l.Release(ctx)
		}
	}

	ls, err := c.AcquireMany(ctx, ks)
	if err != nil {
		t.Fatal(err)
	}
	if err := ls.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if got, n, s := m.calls.Load(), m.batched.Load(), m.singles.Load(); got != 1 || n != 4 || s != 0 {
		t.Fatalf("%d ReleaseMany calls for %d keys and %d single releases; want 1 for 4 and 0", got, n, s)
	}
	free()

	// A lost reply for one key: that key alone is retried with Release,
	// whose "not held" means the first attempt went through.
	m.calls.Store(0)
	m.batched.Store(0)
	m.lostReply = "mr:c"
	ls, err = c.AcquireMany(ctx, ks)
	if err != nil {
		t.Fatal(err)
	}
	if err := ls.Release(ctx); err != nil {
		t.Fatalf("release with one lost reply: %v", err)
	}
	if got, s := m.calls.Load(), m.singles.Load(); got != 1 || s != 1 {
		t.Fatalf("%d ReleaseMany calls and %d single releases; want 1 and 1 (the retry)", got, s)
	}
	free()
	m.lostReply = ""

	// A member that is also held on its own by the same owner stays held:
	// only the set's handle of it is given up.
	m.calls.Store(0)
	m.batched.Store(0)
	octx := lockx.ContextWithOwner(ctx, lockx.NewOwner())
	own, err := c.Acquire(octx, ks[0])
	if err != nil {
		t.Fatal(err)
	}
	ls, err = c.AcquireMany(octx, ks)
	if err != nil {
		t.Fatal(err)
	}
	if err := ls.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := m.batched.Load(); n != 3 {
		t.Fatalf("%d keys released in the batch; want 3 (the reentrant member stays)", n)
	}
	if _, err := other.TryAcquire(ctx, ks[0]); !errors.Is(err, lockx.ErrNotAcquired) {
		t.Fatalf("reentrant member after the set's release: %v, want it still held", err)
	}
	if err := own.Release(ctx); err != nil {
		t.Fatal(err)
	}
	free()
}

// TestLockSetReleaseManyObserved: a set given back through a ManyReleaser
// reports each member's release and hold end to the observer, as member
// releases one by one do.
func TestLockSetReleaseManyObserved(t *testing.T) {
	rec := &recorder{}
	m := &manyReleaser{flaky: newFlaky()}
	c := lockx.New(m, lockx.WithObserver(rec))
	defer c.Close()
	ctx := context.Background()
	ks := []string{"mo:a", "mo:b", "mo:c"}
	ls, err := c.AcquireMany(ctx, ks)
	if err != nil {
		t.Fatal(err)
	}
	if err := ls.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if got := m.calls.Load(); got != 1 {
		t.Fatalf("%d ReleaseMany calls, want 1", got)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	seen := map[string]bool{}
	for _, e := range rec.released {
		if !e.Final || e.Err != nil || e.Status != lockx.StatusOK {
			t.Fatalf("release event %+v: want final, no error", e)
		}
		seen[e.Key] = true
	}
	if len(rec.released) != len(ks) || len(seen) != len(ks) {
		t.Fatalf("%d release events for %v, want one per member", len(rec.released), ks)
	}
	if len(rec.ended) != len(ks) {
		t.Fatalf("%d hold-ended events, want %d", len(rec.ended), len(ks))
	}
}

// A set granted in one call shares the Client's validity timer: each
// member is still declared lost when its own lease passes without renewal,
// a member extended for longer outlives the others, and one extended for
// less than the timer's next firing is declared lost on time.
func TestLockSetMembersShareValidityTimer(t *testing.T) {
	m := &manyBackend{flaky: newFlaky()}
	c := lockx.New(m)
	defer c.Close()
	ctx := context.Background()
	ls, err := c.TryAcquireMany(ctx, []string{"a", "b", "c"}, lockx.WithLease(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if m.batches.Load() != 1 {
		t.Fatal("the set was not granted in one call")
	}
	a, b, cc := ls.Locks()[0], ls.Locks()[1], ls.Locks()[2]
	if err := b.Extend(ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, l := range []*lockx.Lock{a, cc} {
		select {
		case <-l.Lost():
		case <-time.After(3 * time.Second):
			t.Fatalf("%s: not lost after its 300ms lease passed", l.Key())
		}
	}
	select {
	case <-ls.Lost():
	case <-time.After(time.Second):
		t.Fatal("set: Lost not closed with its members'")
	}
	select {
	case <-b.Lost():
		t.Fatal("b lost although extended for 5s")
	default:
	}
	// Shortened below the shared timer's next firing (about 5s away).
	if err := b.Extend(ctx, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.Lost():
	case <-time.After(2 * time.Second):
		t.Fatal("b: not lost 2s after its lease was shortened to 200ms")
	}
	_ = ls.Release(ctx)
}
