package etcdlock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/etcdlock"
)

func TestFence(t *testing.T) {
	b := backend(t, client(t, single))
	ctx := ctxT(t, 5*time.Second)
	res := "acct:" + randHex(4)
	for _, tok := range []lockx.Token{5, 5, 300, 1 << 40} {
		if err := b.Fence(ctx, res, tok); err != nil {
			t.Fatalf("Fence(%d): %v", tok, err)
		}
	}
	var stale *lockx.StaleTokenError
	if err := b.Fence(ctx, res, 299); !errors.As(err, &stale) || stale.Seen != 1<<40 {
		t.Fatalf("Fence(299) = %v, want stale with seen 2^40", err)
	}
	if err := b.Fence(ctx, "", 1); !errors.Is(err, lockx.ErrInvalidArgument) {
		t.Fatalf("empty resource: %v", err)
	}
}

func TestInspectAndForceUnlock(t *testing.T) {
	cli := client(t, single)
	p := etcdlock.WithPrefix(testPrefix())
	c := lockx.New(etcdlock.New(cli, p))
	defer c.Close()
	ctx := ctxT(t, 5*time.Second)
	l, err := c.Acquire(ctx, "inv/item:1")
	if err != nil {
		t.Fatal(err)
	}
	other := lockx.New(etcdlock.New(cli, p))
	defer other.Close()
	if _, err := other.TryAcquire(ctx, "inv/item:10"); err != nil { // a key the first is a prefix of
		t.Fatal(err)
	}
	b := etcdlock.New(cli, p)
	defer b.Close()
	var seen []lockx.LockInfo
	if err := b.Locks(ctx, "inv/item:1", func(li lockx.LockInfo) bool { seen = append(seen, li); return true }); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 2 {
		t.Fatalf("Locks = %+v, want 2", seen)
	}
	info, err := b.Lock(ctx, "inv/item:1")
	if err != nil || info.Owner != l.Owner() || info.Token != l.Token() || info.TTL <= 0 {
		t.Fatalf("Lock = %+v, %v", info, err)
	}
	if _, err := lockx.ForceUnlock(ctx, b, "inv/item:1"); err != nil {
		t.Fatal(err)
	}
	if !closedWithin(l.Lost(), 3*time.Second) {
		t.Fatal("force-unlocked holder not told")
	}
	if err := b.Fence(ctx, "inv/item:1", l.Token()); !errors.Is(err, lockx.ErrStaleToken) {
		t.Fatalf("evicted holder's token still accepted: %v", err)
	}
	if _, err := b.Lock(ctx, "inv/item:1"); !errors.Is(err, lockx.ErrNotHeld) {
		t.Fatalf("Lock after force unlock = %v", err)
	}
}

func TestBadConfig(t *testing.T) {
	ctx := ctxT(t, 5*time.Second)
	for name, b := range map[string]*etcdlock.Backend{
		"nil client":   etcdlock.New(nil),
		"empty prefix": etcdlock.New(client(t, single), etcdlock.WithPrefix("")),
		"queue TTL":    etcdlock.New(client(t, single), etcdlock.WithQueueTTL(0)),
	} {
		_, err := b.Acquire(ctx, driver.Request{Key: "k", Owner: lockx.NewOwner(), Lease: time.Second})
		var ae *lockx.ArgError
		if !errors.As(err, &ae) {
			t.Errorf("%s: Acquire = %v, want *ArgError", name, err)
		}
		_ = b.Close()
	}
}

// TestQueueHeadHolds: a fair waiter that reaches the head of the queue
// holds through its queue entry (no second write); inspection, a renewal
// through another backend and a force release all find it there.
func TestQueueHeadHolds(t *testing.T) {
	cli := client(t, single)
	p := etcdlock.WithPrefix(testPrefix())
	a, w := lockx.New(etcdlock.New(cli, p)), lockx.New(etcdlock.New(cli, p))
	defer a.Close()
	defer w.Close()
	ctx := ctxT(t, 10*time.Second)
	k := "q:" + randHex(4)
	l, err := a.Acquire(ctx, k, lockx.Fair())
	if err != nil {
		t.Fatal(err)
	}
	got := acquireAsync(t, w, k, 10*time.Second, lockx.Fair(), lockx.WithBackoff(10*time.Second, 10*time.Second))
	time.Sleep(200 * time.Millisecond)
	release(t, l)
	var l2 *lockx.Lock
	select {
	case l2 = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("queue head not granted")
	}
	if l2 == nil {
		return
	}
	if l2.Token() <= l.Token() {
		t.Fatalf("token %v not above %v", l2.Token(), l.Token())
	}
	b := etcdlock.New(cli, p)
	defer b.Close()
	info, err := b.Lock(ctx, k)
	if err != nil || info.Owner != l2.Owner() || info.Token != l2.Token() || info.Waiters != 0 {
		t.Fatalf("Lock = %+v, %v; want the queue head %s", info, err, l2.Owner())
	}
	if err := b.Extend(ctx, k, l2.Owner(), 40*time.Second); err != nil {
		t.Fatalf("Extend through another backend: %v", err)
	}
	if d, err := b.TTL(ctx, k, l2.Owner()); err != nil || d < 30*time.Second {
		t.Fatalf("TTL through another backend = %v, %v", d, err)
	}
	if _, err := lockx.ForceUnlock(ctx, b, k); err != nil {
		t.Fatal(err)
	}
	if !closedWithin(l2.Lost(), 3*time.Second) {
		t.Fatal("force-released queue head not told")
	}
}

// TestPlainWaiterGivingUpLeavesQueue: every waiter queues, plain ones too,
// so a plain waiter whose context ends must leave the queue, or its entry
// would hold the key as the head of the queue for its whole queue TTL once
// the holder leaves. (The Client withdraws it when its last attempt fails
// on the ended context; the Backend also withdraws an entry whose waiter
// stopped waiting, after cancelGrace.)
func TestPlainWaiterGivingUpLeavesQueue(t *testing.T) {
	cli := client(t, single)
	p := etcdlock.WithPrefix(testPrefix())
	a, b, c := lockx.New(etcdlock.New(cli, p)), lockx.New(etcdlock.New(cli, p)), lockx.New(etcdlock.New(cli, p))
	defer a.Close()
	defer b.Close()
	defer c.Close()
	k := "w:" + randHex(4)
	l, err := a.Acquire(ctxT(t, 5*time.Second), k)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Acquire(ctxT(t, 300*time.Millisecond), k); !errors.Is(err, lockx.ErrNotAcquired) {
		t.Fatalf("waiter = %v, want ErrNotAcquired", err)
	}
	time.Sleep(600 * time.Millisecond) // past the grace
	release(t, l)
	l2, err := c.TryAcquire(ctxT(t, 5*time.Second), k)
	if err != nil {
		t.Fatalf("a waiter that gave up still holds up the key: %v", err)
	}
	release(t, l2)
}
