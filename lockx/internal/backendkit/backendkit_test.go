package backendkit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/lockx-go/lockx/lockx"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func woken[X any](w *Watcher[X]) bool {
	select {
	case <-w.C():
		return true
	default:
		return false
	}
}

func TestRegistryWakeOwnerAndAll(t *testing.T) {
	var r Registry[string, int]
	a1, a2 := r.Add("k", "a"), r.Add("k", "a")
	b := r.Add("k", "b")
	other := r.Add("j", "a")
	if r.Len("k") != 3 || r.Len("j") != 1 || r.Len("none") != 0 {
		t.Fatalf("Len: k=%d j=%d", r.Len("k"), r.Len("j"))
	}
	r.WakeOwner("k", "a")
	if !woken(a1) || !woken(a2) || woken(b) || woken(other) {
		t.Fatal("WakeOwner woke the wrong watchers")
	}
	r.WakeAll("k")
	if !woken(a1) || !woken(a2) || !woken(b) || woken(other) {
		t.Fatal("WakeAll woke the wrong watchers")
	}
	b.X = 7
	r.WakeIf("k", func(w *Watcher[int]) bool { return w.X == 7 })
	if woken(a1) || !woken(b) {
		t.Fatal("WakeIf woke the wrong watchers")
	}
	r.WakeEvery()
	if !woken(a1) || !woken(a2) || !woken(b) || !woken(other) {
		t.Fatal("WakeEvery missed a watcher")
	}
}

func TestRegistryWakeIsNonBlocking(t *testing.T) {
	var r Registry[int, struct{}]
	w := r.Add(1, "o")
	for range 3 {
		r.WakeAll(1) // a pending wake-up absorbs the rest
	}
	if !woken(w) || woken(w) {
		t.Fatal("want exactly one pending wake-up")
	}
}

func TestRegistryRemove(t *testing.T) {
	var r Registry[string, struct{}]
	w1, w2 := r.Add("k", "a"), r.Add("k", "a")
	if !r.Remove("k", w1) || r.Remove("k", w1) {
		t.Fatal("Remove: want true once, then false")
	}
	r.WakeAll("k")
	if woken(w1) || !woken(w2) {
		t.Fatal("a removed watcher was woken, or a live one not")
	}
	if !r.Remove("k", w2) || r.Len("k") != 0 {
		t.Fatal("Remove of the last watcher")
	}
	n := 0
	r.Keys(func(string) { n++ })
	if n != 0 {
		t.Fatalf("an empty key is kept: %d keys", n)
	}
	if r.Remove("k", w2) {
		t.Fatal("Remove on a gone key")
	}
}

func TestRegistryWakeFirst(t *testing.T) {
	var r Registry[string, struct{}]
	if r.WakeFirst("k", false) {
		t.Fatal("WakeFirst found a watcher of an empty key")
	}
	ws := make([]*Watcher[struct{}], 5)
	for i := range ws {
		ws[i] = r.Add("k", lockx.Owner(fmt.Sprint("o", i%2)))
	}
	for i := range ws {
		if !r.WakeFirst("k", true) {
			t.Fatal("WakeFirst idle found none")
		}
		for j, w := range ws {
			if w.Pending() != (j <= i) {
				t.Fatalf("after %d idle wake-ups, watcher %d pending=%v", i+1, j, w.Pending())
			}
		}
	}
	if r.WakeFirst("k", true) {
		t.Fatal("every watcher is pending: WakeFirst idle woke one")
	}
	if !r.WakeFirst("k", false) || !woken(ws[0]) || !woken(ws[1]) {
		t.Fatal("WakeFirst not idle targets the first registered")
	}
	r.Remove("k", ws[0])
	_ = woken(ws[2])
	r.WakeFirst("k", false)
	if !woken(ws[1]) {
		t.Fatal("the oldest left wakes first")
	}
}

func TestRegistryOwnersEach(t *testing.T) {
	var r Registry[string, struct{}]
	r.Add("k", "a")
	r.Add("k", "a")
	r.Add("k", "b")
	owners := map[lockx.Owner]bool{}
	r.Owners("k", func(o lockx.Owner) { owners[o] = true })
	if len(owners) != 2 || !owners["a"] || !owners["b"] {
		t.Fatalf("Owners: %v", owners)
	}
	r.Add("j", "c")
	n := 0
	r.All(func(*Watcher[struct{}]) { n++ })
	if n != 4 {
		t.Fatalf("All: %d watchers, want 4", n)
	}
	n = 0
	r.Each("k", func(*Watcher[struct{}]) bool { n++; return n < 2 })
	if n != 2 {
		t.Fatalf("Each did not stop when told: %d calls", n)
	}
	n = 0
	r.Owned("k", "a", func(*Watcher[struct{}]) { n++ })
	if n != 2 {
		t.Fatalf("Owned: %d", n)
	}
}

// TestRegistryConcurrent: registrations, cancels and wake-ups from many
// goroutines, under the caller's mutex as a backend uses it (run with
// -race). A watcher registered before a wake-all is woken by it.
func TestRegistryConcurrent(t *testing.T) {
	var mu sync.Mutex
	var r Registry[int, struct{}]
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				k := i % 4
				mu.Lock()
				w := r.Add(k, lockx.Owner(fmt.Sprint(g)))
				mu.Unlock()
				mu.Lock()
				r.WakeAll(k)
				r.WakeFirst(k, i%2 == 0)
				mu.Unlock()
				select {
				case <-w.C():
				case <-time.After(5 * time.Second):
					t.Error("a registered watcher missed a wake-up")
				}
				mu.Lock()
				r.Remove(k, w)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	n := 0
	r.Keys(func(int) { n++ })
	if n != 0 {
		t.Fatalf("%d keys left after every watcher left", n)
	}
}

func TestLossesFireOnce(t *testing.T) {
	var mu sync.Mutex
	var g Group
	var l Losses
	var calls [3]atomic.Int32
	mu.Lock()
	var stops []func()
	for i := range calls {
		stops = append(stops, l.Add(&mu, func() { calls[i].Add(1) }))
	}
	mu.Unlock()
	stops[1]()
	stops[1]() // idempotent
	mu.Lock()
	if l.Len() != 2 {
		t.Fatalf("Len after a stop: %d", l.Len())
	}
	l.Fire(&g)
	l.Fire(&g) // nothing left to fire
	mu.Unlock()
	g.Close()
	for _, s := range stops {
		s() // after the fire: harmless
	}
	if calls[0].Load() != 1 || calls[1].Load() != 0 || calls[2].Load() != 1 {
		t.Fatalf("calls: %d %d %d, want 1 0 1", calls[0].Load(), calls[1].Load(), calls[2].Load())
	}
}

func TestLossesTake(t *testing.T) {
	var mu sync.Mutex
	var l Losses
	n := 0
	mu.Lock()
	l.Add(&mu, func() { n++ })
	stop := l.Add(&mu, func() { n += 10 })
	mu.Unlock()
	stop()
	mu.Lock()
	fns := l.Take()
	again := l.Take()
	mu.Unlock()
	for _, fn := range append(fns, again...) {
		fn()
	}
	if n != 1 {
		t.Fatalf("n = %d, want 1: the stopped callback ran, or one ran twice", n)
	}
}

func TestLossesDrop(t *testing.T) {
	var mu sync.Mutex
	var g Group
	var l Losses
	var called atomic.Bool
	mu.Lock()
	stop := l.Add(&mu, func() { called.Store(true) })
	l.Drop()
	l.Fire(&g)
	mu.Unlock()
	stop()
	g.Close()
	if called.Load() {
		t.Fatal("a dropped callback ran")
	}
}

func TestGroupCloseWaits(t *testing.T) {
	var g Group
	release := make(chan struct{})
	var done atomic.Bool
	if !g.Go(func() { <-release; done.Store(true) }) {
		t.Fatal("Go on an open group")
	}
	ctxDone := make(chan struct{})
	g.Go(func() { <-g.Context().Done(); close(ctxDone) })
	closed := make(chan struct{})
	go func() { g.Close(); close(closed) }()
	<-ctxDone // Close cancels Context
	select {
	case <-closed:
		t.Fatal("Close returned before a goroutine of the group ended")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	<-closed
	if !done.Load() {
		t.Fatal("Close returned before the goroutine finished")
	}
	if g.Go(func() { t.Error("ran after Close") }) {
		t.Fatal("Go after Close reported true")
	}
	if !g.Closed() {
		t.Fatal("Closed after Close")
	}
	g.Close() // again: no-op
	g.Cancel()
	g.Wait()
	select {
	case <-g.Done():
	default:
		t.Fatal("Done not closed after Close")
	}
}

// TestGroupEnter: a goroutine the group did not start is waited for once
// it entered; after Close nothing enters.
func TestGroupEnter(t *testing.T) {
	var g Group
	if !g.Enter() {
		t.Fatal("Enter on an open group")
	}
	closed := make(chan struct{})
	go func() { g.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned while an entered goroutine had not exited")
	case <-time.After(50 * time.Millisecond):
	}
	g.Exit()
	<-closed
	if g.Enter() {
		t.Fatal("Enter after Close reported true")
	}
}

// TestGroupShut: Shut runs its function once, under the mutex, and from
// then on the group starts nothing; Context stays live until Cancel.
func TestGroupShut(t *testing.T) {
	var mu sync.Mutex
	var g Group
	runs := 0
	locked := func() {
		if mu.TryLock() {
			t.Error("Shut's function ran without the mutex held")
			mu.Unlock()
		}
		runs++
	}
	if !g.Shut(&mu, locked) || g.Shut(&mu, locked) || runs != 1 {
		t.Fatalf("Shut: want true once, then false; ran %d times", runs)
	}
	if g.Go(func() {}) || g.Enter() {
		t.Fatal("the group started something after Shut")
	}
	if g.Context().Err() != nil {
		t.Fatal("Shut cancelled Context")
	}
	g.Close()
	if g.Context().Err() == nil {
		t.Fatal("Close after Shut did not cancel Context")
	}
}

// TestGroupCancelThenWait: Cancel refuses new goroutines and cancels
// Context at once, while one still runs; Wait then waits for it.
func TestGroupCancelThenWait(t *testing.T) {
	var g Group
	release := make(chan struct{})
	var done atomic.Bool
	g.Go(func() { <-release; done.Store(true) })
	g.Cancel()
	if g.Context().Err() == nil || !g.Closed() {
		t.Fatal("Cancel did not cancel Context")
	}
	if g.Go(func() {}) {
		t.Fatal("Go after Cancel reported true")
	}
	close(release)
	g.Wait()
	if !done.Load() {
		t.Fatal("Wait returned before the goroutine finished")
	}
}

func TestLease(t *testing.T) {
	var mu sync.Mutex
	var l Lease
	l.Stop()                  // unarmed: no-op
	l.Reset(time.Millisecond) // unarmed: no-op
	fired := make(chan time.Time, 4)
	deadline := time.Now().Add(30 * time.Millisecond)
	mu.Lock()
	l.Arm(10*time.Millisecond, func() {
		mu.Lock()
		defer mu.Unlock()
		if l.Expired(deadline) {
			fired <- time.Now()
		}
	})
	mu.Unlock()
	at := <-fired // fired at 10 ms, found the deadline ahead, armed again
	if at.Before(deadline) {
		t.Fatalf("fired %v before the deadline", deadline.Sub(at))
	}
	mu.Lock()
	deadline = time.Now().Add(time.Hour)
	l.Arm(time.Hour, nil) // moved: the first function stays
	l.Stop()
	mu.Unlock()
	select {
	case <-fired:
		t.Fatal("a stopped lease fired")
	case <-time.After(30 * time.Millisecond):
	}
}

func TestErrors(t *testing.T) {
	cause := errors.New("boom")
	if err := Unavailable("op", cause); !errors.Is(err, lockx.ErrUnavailable) || !errors.Is(err, cause) {
		t.Fatalf("Unavailable: %v", err)
	}
	arg := &lockx.ArgError{Arg: "x", Reason: "bad"}
	if err := Unavailable("op", arg); err != error(arg) {
		t.Fatalf("an argument error was wrapped: %v", err)
	}
	if Unavailable("op", nil) != nil {
		t.Fatal("Unavailable(nil)")
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	if err := Fail(ctx, "op", cause); !errors.Is(err, lockx.ErrUnavailable) {
		t.Fatalf("Fail, live ctx: %v", err)
	}
	if Ended(ctx, "op") != nil {
		t.Fatal("Ended on a live ctx")
	}
	why := errors.New("shutting down")
	cancel(why)
	if err := Fail(ctx, "op", cause); !errors.Is(err, context.Canceled) || errors.Is(err, lockx.ErrUnavailable) {
		t.Fatalf("Fail, ended ctx: %v", err)
	}
	wrapped := fmt.Errorf("dial: %w", context.Canceled)
	if err := Fail(ctx, "op", wrapped); err != wrapped {
		t.Fatalf("Fail keeps an error that matches ctx's: %v", err)
	}
	if err := Ended(ctx, "op"); !errors.Is(err, lockx.ErrUnavailable) || !errors.Is(err, why) {
		t.Fatalf("Ended: %v", err)
	}
}
