package lockx_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockx-go/lockx/internal/suitekit"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/memlock"
)

// counted is memlock with its lock calls counted.
type counted struct {
	*memlock.Backend
	acquires, releases, passes atomic.Int64
}

func (b *counted) Acquire(ctx context.Context, req driver.Request) (driver.Result, error) {
	b.acquires.Add(1)
	return b.Backend.Acquire(ctx, req)
}

func (b *counted) Release(ctx context.Context, key string, owner driver.Owner) error {
	b.releases.Add(1)
	return b.Backend.Release(ctx, key, owner)
}

func (b *counted) Pass(ctx context.Context, key string, from, to driver.Owner, lease time.Duration) (driver.Result, error) {
	b.passes.Add(1)
	return b.Backend.Pass(ctx, key, from, to, lease)
}

func (b *counted) calls() [3]int64 {
	return [3]int64{b.acquires.Load(), b.releases.Load(), b.passes.Load()}
}

// waitGate waits until n callers wait at key's LocalFirst gate on c.
func waitGate(t *testing.T, c *lockx.Client, key string, n int) {
	t.Helper()
	suitekit.WaitFor(t, fmt.Sprintf("%d callers at the gate of %q", n, key), 5*time.Second, func() bool { return lockx.GateQueue(c, key) == n })
}

// queueAt starts n LocalFirst acquisitions of key on c, one after another
// at its gate, each releasing at once after it recorded its token. It
// returns the channel their tokens arrive on, in grant order, and a
// function that waits until they have all released.
func queueAt(t *testing.T, c *lockx.Client, key string, n int) (<-chan lockx.Token, func()) {
	t.Helper()
	ctx := context.Background()
	toks := make(chan lockx.Token, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			l, err := c.Acquire(ctx, key, lockx.LocalFirst())
			if err != nil {
				t.Error(err)
				toks <- 0
				return
			}
			toks <- l.Token()
			if err := l.Release(ctx); err != nil {
				t.Error(err)
			}
		})
		waitGate(t, c, key, i+1)
	}
	return toks, wg.Wait
}

// TestLocalPass: a LocalFirst hold that ends while another goroutine of
// its Client waits at the gate hands it the lock in one backend call (a
// Pass, no Release or Acquire), with a larger token every time, and after
// MaxLocalPasses passes in a row the key goes through the backend once
// (Release, Acquire) before passes resume.
func TestLocalPass(t *testing.T) {
	ctx := context.Background()
	b := &counted{Backend: memlock.New()}
	c := lockx.New(b)
	defer c.Close()
	first, err := c.Acquire(ctx, "k", lockx.LocalFirst())
	if err != nil {
		t.Fatal(err)
	}
	n := lockx.MaxLocalPasses + 4
	toks, released := queueAt(t, c, "k", n)
	before := b.calls()
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	prev := first.Token()
	for i := range n {
		tok := <-toks
		if tok <= prev {
			t.Fatalf("grant %d: token %d after %d", i+1, tok, prev)
		}
		prev = tok
	}
	released()
	got := b.calls()
	for i := range got {
		got[i] -= before[i]
	}
	// n handoffs: all passes but the one after MaxLocalPasses in a row (a
	// release and an acquire), and the last hold's release.
	want := [3]int64{1, 2, int64(n - 1)}
	if got != want {
		t.Errorf("backend calls (acquire, release, pass) = %v, want %v", got, want)
	}
	if l, err := c.TryAcquire(ctx, "k"); err != nil {
		t.Errorf("key not free after the last release: %v", err)
	} else {
		_ = l.Release(ctx)
	}
}

// TestLocalPassYieldsToQueuedWaiter: a waiter of another Client (another
// process) queued at the backend is not jumped by a local pass: the key
// goes to it, and the local waiter acquires after it.
func TestLocalPassYieldsToQueuedWaiter(t *testing.T) {
	ctx := context.Background()
	b := &counted{Backend: memlock.New()}
	c := lockx.New(b)
	defer c.Close()
	remote := lockx.New(b.Backend)
	defer remote.Close()
	held, err := c.Acquire(ctx, "k", lockx.LocalFirst())
	if err != nil {
		t.Fatal(err)
	}
	// The local waiter would take the key while the remote one holds it if it could.
	remoteTok := suitekit.HoldBriefly(ctx, t, remote, "k", 10*time.Millisecond, lockx.Fair())
	suitekit.WaitFor(t, "the remote waiter queued", 5*time.Second, func() bool {
		info, err := b.Lock(ctx, "k")
		return err == nil && info.Waiters == 1
	})
	toks, released := queueAt(t, c, "k", 1)
	defer released()
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// memlock's tokens come from one counter: their order is the grants'.
	rt, lt := <-remoteTok, <-toks
	if !(held.Token() < rt && rt < lt) {
		t.Errorf("tokens: released %d, remote %d, local %d: want the queued remote waiter granted first", held.Token(), rt, lt)
	}
	if got := b.passes.Load(); got != 1 {
		t.Errorf("%d passes tried, want 1 (declined: the remote waiter was queued)", got)
	}
}

// slowPass is memlock with each Pass held back up to 2 ms before it runs,
// so that the waiter's giving up, Close and the lease's end fall while a
// pass is in flight.
type slowPass struct{ *memlock.Backend }

func (b slowPass) Pass(ctx context.Context, key string, from, to driver.Owner, lease time.Duration) (driver.Result, error) {
	time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
	return b.Backend.Pass(ctx, key, from, to, lease)
}

// TestLocalPassRacesCloseAndLoss ends a LocalFirst hold while a goroutine
// waits at its gate, racing the release (a pass held back a little) with
// Close, with the waiter giving up and with the end of the hold's short
// lease, in many interleavings. Every call must return, and once they
// have, nothing may be left held at the backend: a pass whose waiter gave
// up, or whose Client closed, must free the grant.
func TestLocalPassRacesCloseAndLoss(t *testing.T) {
	ctx := context.Background()
	jitter := func(max int) { time.Sleep(time.Duration(rand.IntN(max)) * time.Microsecond) }
	for i := range 300 {
		mb := memlock.New()
		c := lockx.New(slowPass{mb})
		lease := time.Duration(1+rand.IntN(4)) * time.Millisecond
		l, err := c.Acquire(ctx, "k", lockx.LocalFirst(), lockx.WithLease(lease))
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wctx, cancel := context.WithCancel(ctx)
		wg.Go(func() {
			if l, err := c.Acquire(wctx, "k", lockx.LocalFirst()); err == nil {
				_ = l.Release(ctx)
			}
		})
		waitGate(t, c, "k", 1)
		start := make(chan struct{})
		wg.Go(func() { <-start; _ = l.Release(ctx) })
		wg.Go(func() { <-start; jitter(3000); cancel() })
		wg.Go(func() { <-start; jitter(3000); _ = c.Close() })
		close(start)
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: Release, Close and the waiter still running after 10 s", i)
		}
		cancel()
		// A lease of 4 ms or less: what is still held after it was not freed.
		time.Sleep(5 * time.Millisecond)
		if info, err := mb.Lock(ctx, "k"); err == nil && info.TTL > 5*time.Millisecond {
			t.Fatalf("round %d: %q still held by %s (lease left %v) after every call returned", i, "k", info.Owner, info.TTL)
		}
	}
}
