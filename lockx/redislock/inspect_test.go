package redislock_test

import (
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/redislock"
)

func inspectSuite(t *testing.T, rdb redis.UniversalClient) {
	ctx := ctxT(t, 20*time.Second)
	b := backend(t, rdb)
	c := lockx.New(b)
	t.Cleanup(func() { _ = c.Close() })

	held := map[string]*lockx.Lock{}
	// Enough keys to spread over every Cluster master and over SCAN pages,
	// plus keys that need escaping or the fixed hash tag.
	keys := []string{"}odd", "jobs/[x]*", "jobs/a}b"}
	for i := range 40 {
		keys = append(keys, fmt.Sprintf("jobs/%02d", i))
	}
	for _, k := range keys {
		l, err := c.Acquire(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		held[k] = l
	}
	// A tombstone (released key) and a queue must not show up as locks.
	free, err := c.Acquire(ctx, "jobs/free")
	if err != nil {
		t.Fatal(err)
	}
	if err := free.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Acquire(ctx, driver.Request{Key: "jobs/00", Owner: lockx.NewOwner(), Lease: time.Second, Fair: true, Wait: true}); err != nil {
		t.Fatal(err)
	}

	list := func(prefix string) map[string]lockx.LockInfo {
		got := map[string]lockx.LockInfo{}
		if err := b.Locks(ctx, prefix, func(li lockx.LockInfo) bool { got[li.Key] = li; return true }); err != nil {
			t.Fatal(err)
		}
		return got
	}
	all := list("")
	if len(all) != len(keys) {
		var ks []string
		for k := range all {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		t.Fatalf("listed %d locks, want %d: %q", len(all), len(keys), ks)
	}
	for k, l := range held {
		li := all[k]
		if li.Owner != l.Owner() || li.Token != l.Token() || li.TTL <= 0 || li.TTL > lockx.DefaultLease {
			t.Errorf("%q: %+v, want owner %s token %d", k, li, l.Owner(), l.Token())
		}
	}
	if w := all["jobs/00"].Waiters; w != 1 {
		t.Errorf("jobs/00 waiters %d, want 1", w)
	}
	if got := list("jobs/[x]"); len(got) != 1 {
		t.Errorf("prefix with glob characters: %v", got)
	}
	if got := list("}"); len(got) != 1 {
		t.Errorf("prefix of a fixed-tag key: %v", got)
	}
	n := 0
	_ = b.Locks(ctx, "", func(lockx.LockInfo) bool { n++; return n < 3 })
	if n != 3 {
		t.Errorf("Locks went on after fn returned false: %d calls", n)
	}
	if li, err := b.Lock(ctx, "jobs/a}b"); err != nil || li.Token != held["jobs/a}b"].Token() {
		t.Errorf("Lock: %+v, %v", li, err)
	}
	if _, err := b.Lock(ctx, "jobs/free"); !errors.Is(err, lockx.ErrNotHeld) {
		t.Errorf("Lock of a released key: %v", err)
	}
}

func TestInspectSingle(t *testing.T) { inspectSuite(t, single(t)) }

func TestInspectCluster(t *testing.T) {
	cl := testenv.SharedCluster(t)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs})
	t.Cleanup(func() { _ = rdb.Close() })
	inspectSuite(t, rdb)
}

// ForceUnlock evicts the holder, fences off its token and hands the lock to
// a waiter through the release's own wake-up.
func TestForceUnlockWakesWaiter(t *testing.T) {
	ctx := ctxT(t, 10*time.Second)
	rdb := single(t)
	prefix := testPrefix()
	b1 := redislock.New(rdb, redislock.WithPrefix(prefix))
	b2 := redislock.New(rdb, redislock.WithPrefix(prefix))
	holder, waiter := lockx.New(b1, lockx.WithWatchdog(300*time.Millisecond)), lockx.New(b2)
	t.Cleanup(func() { _ = holder.Close(); _ = waiter.Close() })
	l, err := holder.Acquire(ctx, "stuck")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *lockx.Lock, 1)
	go func() {
		w, err := waiter.Acquire(ctx, "stuck", lockx.WithBackoff(10*time.Second, 10*time.Second))
		if err != nil {
			t.Error(err)
		}
		got <- w
	}()
	time.Sleep(100 * time.Millisecond) // the waiter is registered
	start := time.Now()
	info, err := lockx.ForceUnlock(ctx, redislock.New(rdb, redislock.WithPrefix(prefix)), "stuck")
	if err != nil {
		t.Fatal(err)
	}
	if info.Token != l.Token() || info.Owner != l.Owner() {
		t.Fatalf("evicted %+v", info)
	}
	w := <-got
	if w == nil {
		t.FailNow()
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("waiter got the lock %v after the eviction: not woken", d)
	}
	if err := b1.Fence(ctx, "stuck", l.Token()); !errors.Is(err, lockx.ErrStaleToken) {
		t.Errorf("evicted holder's write: %v, want stale", err)
	}
	if err := b1.Fence(ctx, "stuck", w.Token()); err != nil {
		t.Errorf("new holder's write: %v", err)
	}
	_ = w.Release(ctx)
	<-l.Lost() // the watchdog's next renewal finds the lock gone
}
