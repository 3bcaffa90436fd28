package lockxtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockx-go/lockx/internal/suitekit"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
)

// RunMany runs the multi-key conformance suite (Client.AcquireMany over the
// backend, through its ManyAcquirer if it has one) as subtests of t.
// newBackend follows Run's contract.
func RunMany(t *testing.T, newBackend func(t *testing.T) driver.Backend) {
	s := &suite{newBackend: newBackend}
	suitekit.Parallel(t, []suitekit.Test{
		{Name: "OverlappingSetsNoDeadlock", Fn: s.testManyOverlapping},
		{Name: "AllOrNothing", Fn: s.testManyAllOrNothing},
		{Name: "AllOrNothingWaitBudget", Fn: s.testManyWaitBudget},
		{Name: "TokensPerKey", Fn: s.testManyTokens},
		{Name: "LossCancelsSet", Fn: s.testManyLoss},
		{Name: "ReleaseFreesAll", Fn: s.testManyRelease},
		{Name: "WaitsForHeldKey", Fn: s.testManyWaits},
		{Name: "Reentrancy", Fn: s.testManyReentrancy},
		{Name: "DuplicatesAndOrder", Fn: s.testManyDuplicates},
		{Name: "BadInput", Fn: s.testManyBadInput},
		{Name: "WatchdogKeepsSet", Fn: s.testManyWatchdog},
	})
}

// keys returns n keys no other test uses, sharing one random stem.
func keys(t *testing.T, n int) []string {
	stem := suitekit.Key(t)
	ks := make([]string, n)
	for i := range ks {
		ks[i] = fmt.Sprintf("%s:%c", stem, 'a'+i)
	}
	return ks
}

func mustAcquireMany(t *testing.T, c *lockx.Client, ctx context.Context, ks []string, opts ...lockx.Option) *lockx.LockSet {
	t.Helper()
	s, err := c.AcquireMany(ctx, ks, opts...)
	if err != nil {
		t.Fatalf("AcquireMany(%q): %v", ks, err)
	}
	return s
}

func mustReleaseSet(t *testing.T, s *lockx.LockSet) {
	t.Helper()
	if err := s.Release(context.Background()); err != nil {
		t.Fatalf("Release of set %q: %v", s.Keys(), err)
	}
}

// expectFree checks that every key can be taken by a fresh owner now.
func expectFree(t *testing.T, c *lockx.Client, ks ...string) {
	t.Helper()
	for _, k := range ks {
		l, err := c.TryAcquire(suitekit.CtxT(t, 5*time.Second), k)
		if err != nil {
			t.Fatalf("key %q not free: %v", k, err)
		}
		mustRelease(t, l)
	}
}

func (s *suite) testManyOverlapping(t *testing.T) {
	ks := keys(t, 3)
	a, b, c := ks[0], ks[1], ks[2]
	sets := [][]string{{a, b}, {b, c}, {c, a}, {c, b, a}}
	clients := []*lockx.Client{suitekit.Client(t, s.newBackend), suitekit.Client(t, s.newBackend), suitekit.Client(t, s.newBackend)}
	var inside [3]atomic.Int32
	idx := map[string]int{a: 0, b: 1, c: 2}
	const goroutines, rounds = 8, 10
	var wg sync.WaitGroup
	var overlaps atomic.Int32
	errs := make(chan error, goroutines)
	ctx := suitekit.CtxT(t, 60*time.Second) // a deadlock ends here, as a failure
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			cl := clients[g%len(clients)]
			set := sets[g%len(sets)]
			for i := 0; i < rounds; i++ {
				ls, err := cl.AcquireMany(ctx, set, lockx.WithBackoff(time.Millisecond, 20*time.Millisecond))
				if err != nil {
					errs <- err
					return
				}
				for _, k := range set {
					if inside[idx[k]].Add(1) != 1 {
						overlaps.Add(1)
					}
				}
				time.Sleep(200 * time.Microsecond)
				for _, k := range set {
					inside[idx[k]].Add(-1)
				}
				if err := ls.Release(context.Background()); err != nil {
					errs <- err
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := overlaps.Load(); n != 0 {
		t.Fatalf("%d times two sets held one key at once", n)
	}
	expectFree(t, clients[0], ks...)
}

func (s *suite) testManyAllOrNothing(t *testing.T) {
	ks := keys(t, 3)
	c1, c2 := suitekit.Client(t, s.newBackend), suitekit.Client(t, s.newBackend)
	held := mustAcquire(t, c2, suitekit.CtxT(t, 5*time.Second), ks[1])
	_, err := c1.TryAcquireMany(suitekit.CtxT(t, 5*time.Second), ks)
	if !errors.Is(err, lockx.ErrNotAcquired) {
		t.Fatalf("TryAcquireMany with a held member = %v, want ErrNotAcquired", err)
	}
	var ke *lockx.KeyError
	if !errors.As(err, &ke) || ke.Key != ks[1] {
		t.Fatalf("error %v does not name the held key %q", err, ks[1])
	}
	// The members taken before the refusal were given back.
	expectFree(t, suitekit.Client(t, s.newBackend), ks[0], ks[2])
	mustRelease(t, held)
	ls, err := c1.TryAcquireMany(suitekit.CtxT(t, 5*time.Second), ks)
	if err != nil {
		t.Fatalf("TryAcquireMany after the release: %v", err)
	}
	mustReleaseSet(t, ls)
}

func (s *suite) testManyWaitBudget(t *testing.T) {
	ks := keys(t, 3)
	c1, c2 := suitekit.Client(t, s.newBackend), suitekit.Client(t, s.newBackend)
	held := mustAcquire(t, c2, suitekit.CtxT(t, 5*time.Second), ks[2])
	defer mustRelease(t, held)
	start := time.Now()
	_, err := c1.AcquireMany(suitekit.CtxT(t, 10*time.Second), ks, lockx.WithWait(200*time.Millisecond))
	if !errors.Is(err, lockx.ErrNotAcquired) {
		t.Fatalf("AcquireMany past its budget = %v, want ErrNotAcquired", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("gave up after %v with a 200ms budget", el)
	}
	var ke *lockx.KeyError
	if !errors.As(err, &ke) || ke.Key != ks[2] {
		t.Fatalf("error %v does not name the held key %q", err, ks[2])
	}
	expectFree(t, suitekit.Client(t, s.newBackend), ks[0], ks[1])
}

func (s *suite) testManyTokens(t *testing.T) {
	ks := keys(t, 4)
	c := suitekit.Client(t, s.newBackend)
	prev := map[string]lockx.Token{}
	for round := 0; round < 3; round++ {
		ls := mustAcquireMany(t, c, suitekit.CtxT(t, 5*time.Second), ks)
		if got := len(ls.Locks()); got != len(ks) {
			t.Fatalf("%d members, want %d", got, len(ks))
		}
		for _, l := range ls.Locks() {
			k := l.Key()
			tok := ls.Token(k)
			if tok == 0 || tok > lockx.MaxToken || tok != l.Token() {
				t.Fatalf("Token(%q) = %d, member token %d", k, tok, l.Token())
			}
			if tok <= prev[k] {
				t.Fatalf("token of %q went from %d to %d", k, prev[k], tok)
			}
			prev[k] = tok
		}
		if ls.Token("not-in-set") != 0 {
			t.Fatal("Token of a key outside the set is not 0")
		}
		mustReleaseSet(t, ls)
	}
}

func (s *suite) testManyLoss(t *testing.T) {
	ks := keys(t, 3)
	c := suitekit.Client(t, s.newBackend)
	ls := mustAcquireMany(t, c, suitekit.CtxT(t, 5*time.Second), ks, lockx.WithWatchdog(300*time.Millisecond))
	b := s.newBackend(t)
	t.Cleanup(func() { _ = b.Close() })
	// An operator's force-unlock of one member.
	if err := b.Release(suitekit.CtxT(t, 5*time.Second), ks[1], ls.Owner()); err != nil {
		t.Fatalf("force release: %v", err)
	}
	if !suitekit.ClosedWithin(ls.Lost(), 2*time.Second) {
		t.Fatal("set's Lost did not fire after a member was taken away")
	}
	if !errors.Is(context.Cause(ls.Context()), lockx.ErrLost) {
		t.Fatalf("set context cause = %v, want ErrLost", context.Cause(ls.Context()))
	}
	if err := ls.Release(context.Background()); !errors.Is(err, lockx.ErrLost) {
		t.Fatalf("Release of a set with a lost member = %v, want ErrLost", err)
	}
	expectFree(t, suitekit.Client(t, s.newBackend), ks...)
}

func (s *suite) testManyRelease(t *testing.T) {
	ks := keys(t, 5)
	c := suitekit.Client(t, s.newBackend)
	ls := mustAcquireMany(t, c, suitekit.CtxT(t, 5*time.Second), ks)
	other := suitekit.Client(t, s.newBackend)
	for _, k := range ks {
		expectNotAcquired(t, other, k)
	}
	if o, ok := lockx.OwnerFromContext(ls.Context()); !ok || o != ls.Owner() {
		t.Fatalf("set context carries owner %q, want %q", o, ls.Owner())
	}
	mustReleaseSet(t, ls)
	if context.Cause(ls.Context()) != lockx.ErrReleased {
		t.Fatalf("cause = %v, want ErrReleased", context.Cause(ls.Context()))
	}
	select {
	case <-ls.Lost():
		t.Fatal("Lost closed by Release")
	default:
	}
	if err := ls.Release(context.Background()); !errors.Is(err, lockx.ErrNotHeld) {
		t.Fatalf("second Release = %v, want ErrNotHeld", err)
	}
	expectFree(t, other, ks...)
}

func (s *suite) testManyWaits(t *testing.T) {
	ks := keys(t, 3)
	c1, c2 := suitekit.Client(t, s.newBackend), suitekit.Client(t, s.newBackend)
	held := mustAcquire(t, c2, suitekit.CtxT(t, 5*time.Second), ks[1])
	done := make(chan error, 1)
	var got *lockx.LockSet
	go func() {
		var err error
		got, err = c1.AcquireMany(suitekit.CtxT(t, 10*time.Second), ks, lockx.WithBackoff(5*time.Millisecond, 50*time.Millisecond))
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("AcquireMany returned while a member was held: %v", err)
	case <-time.After(150 * time.Millisecond):
	}
	mustRelease(t, held)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("AcquireMany after the release: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("AcquireMany still waiting 5s after the held member was released")
	}
	mustReleaseSet(t, got)
}

func (s *suite) testManyReentrancy(t *testing.T) {
	ks := keys(t, 2)
	c := suitekit.Client(t, s.newBackend)
	l := mustAcquire(t, c, suitekit.CtxT(t, 5*time.Second), ks[0])
	// Under the lock's context the set re-enters ks[0].
	ls := mustAcquireMany(t, c, l.Context(), ks)
	if ls.Owner() != l.Owner() || ls.Token(ks[0]) != l.Token() {
		t.Fatalf("set owner/token %q/%d, lock %q/%d: not re-entered", ls.Owner(), ls.Token(ks[0]), l.Owner(), l.Token())
	}
	// And the set's context re-enters its members.
	inner, err := c.Acquire(ls.Context(), ks[1])
	if err != nil || inner.Token() != ls.Token(ks[1]) {
		t.Fatalf("Acquire under the set's context: %v (token %d, set %d)", err, inner.Token(), ls.Token(ks[1]))
	}
	mustRelease(t, inner)
	mustReleaseSet(t, ls)
	other := suitekit.Client(t, s.newBackend)
	expectNotAcquired(t, other, ks[0]) // still held by l
	expectFree(t, other, ks[1])
	mustRelease(t, l)
	expectFree(t, other, ks[0])
}

func (s *suite) testManyDuplicates(t *testing.T) {
	ks := keys(t, 3)
	c := suitekit.Client(t, s.newBackend)
	ls := mustAcquireMany(t, c, suitekit.CtxT(t, 5*time.Second), []string{ks[2], ks[0], ks[2], ks[1], ks[0]})
	got := ls.Keys()
	if len(got) != 3 || got[0] != ks[0] || got[1] != ks[1] || got[2] != ks[2] {
		t.Fatalf("Keys() = %q, want %q", got, ks)
	}
	mustReleaseSet(t, ls)
	expectFree(t, c, ks...)
}

func (s *suite) testManyBadInput(t *testing.T) {
	c := suitekit.Client(t, s.newBackend)
	ctx := suitekit.CtxT(t, 5*time.Second)
	k := suitekit.Key(t)
	many := make([]string, lockx.DefaultMaxKeys+1)
	for i := range many {
		many[i] = fmt.Sprintf("%s:%d", k, i)
	}
	cases := []struct {
		name string
		keys []string
		opts []lockx.Option
	}{
		{"no keys", nil, nil},
		{"empty key", []string{k, ""}, nil},
		{"oversized key", []string{k, k + string(make([]byte, lockx.DefaultMaxKeyLen))}, nil},
		{"too many keys", many, nil},
		{"over WithMaxKeys", []string{k + "1", k + "2", k + "3"}, []lockx.Option{lockx.WithMaxKeys(2)}},
		{"bad WithMaxKeys", []string{k}, []lockx.Option{lockx.WithMaxKeys(0)}},
	}
	for _, tc := range cases {
		for _, try := range []bool{false, true} {
			var err error
			if try {
				_, err = c.TryAcquireMany(ctx, tc.keys, tc.opts...)
			} else {
				_, err = c.AcquireMany(ctx, tc.keys, tc.opts...)
			}
			var ae *lockx.ArgError
			if !errors.As(err, &ae) || !errors.Is(err, lockx.ErrInvalidArgument) {
				t.Errorf("%s (try %v): %v, want *ArgError", tc.name, try, err)
			}
		}
	}
	// Nothing was taken on the way.
	expectFree(t, c, k, k+"1", k+"2", many[0])
	// Exactly the maximum is fine.
	ls := mustAcquireMany(t, c, ctx, many[:lockx.DefaultMaxKeys])
	mustReleaseSet(t, ls)
}

func (s *suite) testManyWatchdog(t *testing.T) {
	ks := keys(t, 4)
	c := suitekit.Client(t, s.newBackend)
	// A 1 s lease, as in WatchdogKeepsLease: renewals every ~330 ms leave
	// room for a loaded machine's scheduling delays.
	ls := mustAcquireMany(t, c, suitekit.CtxT(t, 10*time.Second), ks, lockx.WithWatchdog(time.Second))
	other := suitekit.Client(t, s.newBackend)
	deadline := time.Now().Add(2500 * time.Millisecond)
	for time.Now().Before(deadline) {
		for _, k := range ks {
			expectNotAcquired(t, other, k)
		}
		time.Sleep(100 * time.Millisecond)
	}
	select {
	case <-ls.Lost():
		for _, l := range ls.Locks() {
			t.Logf("member %q: cause %v", l.Key(), context.Cause(l.Context()))
		}
		t.Fatal("set lost although the watchdog was renewing it")
	default:
	}
	mustReleaseSet(t, ls)
	expectFree(t, other, ks...)
}
