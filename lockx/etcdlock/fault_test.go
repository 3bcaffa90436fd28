package etcdlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/etcdlock"
	"github.com/lockx-go/lockx/lockx/etcdlock/etcdtest"
)

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func closedWithin(ch <-chan struct{}, d time.Duration) bool {
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}

// entryLease finds the lease of the entry <anything>/<part>/<name> under
// prefix, as an operator with etcdctl would.
func entryLease(t *testing.T, cli *clientv3.Client, prefix, part, name string) clientv3.LeaseID {
	t.Helper()
	resp, err := cli.Get(ctxT(t, 5*time.Second), prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		if strings.HasSuffix(string(kv.Key), "/"+part+"/"+name) {
			return clientv3.LeaseID(kv.Lease)
		}
	}
	t.Fatalf("no %s entry of %s under %s", part, name, prefix)
	return 0
}

// acquireAsync acquires k through c in the background.
func acquireAsync(t *testing.T, c *lockx.Client, k string, d time.Duration, opts ...lockx.Option) <-chan *lockx.Lock {
	got := make(chan *lockx.Lock, 1)
	go func() {
		l, err := c.Acquire(ctxT(t, d), k, opts...)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	return got
}

func release(t *testing.T, l *lockx.Lock) {
	t.Helper()
	if err := l.Release(context.Background()); err != nil {
		t.Fatalf("Release(%q): %v", l.Key(), err)
	}
}

// TestLeaseRevokedFiresLost is etcd#6127 ("lock lost not signalled"): the
// holder's lease is revoked behind its back (an operator, or etcd expiring
// it after a pause); Lost fires and the context is cancelled within a
// moment — long before the next renewal of its 30 s lease would have told —
// and a waiter acquires with a greater token. Without the loss watch
// (WithLossWatchDelay of an hour) Lost does not fire in that time: the
// watch is what makes the test pass.
func TestLeaseRevokedFiresLost(t *testing.T) {
	t.Parallel()
	cli := client(t, single)
	for _, watch := range []bool{true, false} {
		prefix := testPrefix()
		delay := etcdlock.WithLossWatchDelay(0)
		if !watch {
			delay = etcdlock.WithLossWatchDelay(time.Hour)
		}
		holder := lockx.New(etcdlock.New(cli, etcdlock.WithPrefix(prefix), delay))
		waiter := lockx.New(etcdlock.New(cli, etcdlock.WithPrefix(prefix)))
		k := "order:" + randHex(4)
		l, err := holder.Acquire(ctxT(t, 5*time.Second), k)
		if err != nil {
			t.Fatal(err)
		}
		got := acquireAsync(t, waiter, k, 10*time.Second, lockx.WithBackoff(10*time.Second, 10*time.Second))
		time.Sleep(100 * time.Millisecond)
		if _, err := cli.Revoke(ctxT(t, 5*time.Second), entryLease(t, cli, prefix, "h", string(l.Owner()))); err != nil {
			t.Fatal(err)
		}
		lost := closedWithin(l.Lost(), 2*time.Second)
		if watch {
			if !lost {
				t.Fatal("Lost did not fire after the holder's lease was revoked")
			}
			if !errors.Is(context.Cause(l.Context()), lockx.ErrLost) {
				t.Fatalf("cause = %v, want ErrLost", context.Cause(l.Context()))
			}
			select {
			case l2 := <-got:
				if l2 == nil {
					return
				}
				if l2.Token() <= l.Token() {
					t.Fatalf("waiter token %v not above %v", l2.Token(), l.Token())
				}
				release(t, l2)
			case <-time.After(3 * time.Second):
				t.Fatal("waiter not woken by the revocation")
			}
		} else {
			if lost {
				t.Fatal("Lost fired without the loss watch: the test would not tell the watch works")
			}
			if l2 := <-got; l2 != nil {
				release(t, l2)
			}
		}
		_ = holder.Close()
		_ = waiter.Close()
	}
}

// TestExpiredQueueEntryWaiterRequeues is etcd#19597 ("waiter with an
// expired session keeps waiting"): a fair waiter's queue entry disappears
// (its lease revoked, as when its session expires). The waiter notices at
// its next refresh, queues again, and acquires a real lock: its key exists,
// others are refused, its token is above the previous holder's.
func TestExpiredQueueEntryWaiterRequeues(t *testing.T) {
	t.Parallel()
	cli := client(t, single)
	prefix := etcdlock.WithPrefix(testPrefix())
	raw := testPrefixOf(prefix)
	a := lockx.New(etcdlock.New(cli, prefix))
	defer a.Close()
	bc := lockx.New(etcdlock.New(cli, prefix))
	defer bc.Close()
	k := "job:" + randHex(4)
	opts := []lockx.Option{lockx.Fair(), lockx.WithQueueTTL(3 * time.Second), lockx.WithBackoff(10*time.Second, 10*time.Second)}
	l, err := a.Acquire(ctxT(t, 5*time.Second), k, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx := lockx.ContextWithOwner(ctxT(t, 15*time.Second), lockx.NewOwner())
	owner, _ := lockx.OwnerFromContext(ctx)
	got := make(chan *lockx.Lock, 1)
	go func() {
		l, err := bc.Acquire(ctx, k, opts...)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	time.Sleep(300 * time.Millisecond)
	if _, err := cli.Revoke(ctxT(t, 5*time.Second), entryLease(t, cli, raw, "q", string(owner))); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // past a refresh (queue TTL / 3): the waiter has queued again
	entryLease(t, cli, raw, "q", string(owner))
	release(t, l)
	select {
	case l2 := <-got:
		if l2 == nil {
			return
		}
		if l2.Token() <= l.Token() {
			t.Fatalf("token %v not above %v", l2.Token(), l.Token())
		}
		other := lockx.New(etcdlock.New(cli, prefix))
		defer other.Close()
		if l3, err := other.TryAcquire(ctxT(t, 5*time.Second), k); err == nil {
			t.Fatalf("another client acquired %q while the requeued waiter holds it (token %v)", k, l3.Token())
		}
		release(t, l2)
	case <-time.After(5 * time.Second):
		t.Fatal("waiter whose queue entry expired never acquired")
	}
}

// TestStaleReleaseRetryKeepsNewerGrant is etcd#22082: a release whose
// reply was lost is retried after the same owner has been granted the key
// again (here through another backend). The retry revokes the old grant's
// lease, which is gone, so it reports ErrNotHeld and the newer grant stays.
func TestStaleReleaseRetryKeepsNewerGrant(t *testing.T) {
	cli := client(t, single)
	p := testPrefix()
	b1 := backend(t, cli, etcdlock.WithPrefix(p))
	b2 := backend(t, cli, etcdlock.WithPrefix(p))
	ctx := ctxT(t, 5*time.Second)
	k, owner := "acct:"+randHex(4), lockx.NewOwner()
	r1, err := b1.Acquire(ctx, driver.Request{Key: k, Owner: owner, Lease: 10 * time.Second})
	if err != nil || !r1.Acquired {
		t.Fatalf("Acquire: %+v %v", r1, err)
	}
	// The release reaches etcd but its reply is lost: b1 still believes it
	// holds the grant.
	if _, err := cli.Revoke(ctx, entryLease(t, cli, p, "h", string(owner))); err != nil {
		t.Fatal(err)
	}
	r2, err := b2.Acquire(ctx, driver.Request{Key: k, Owner: owner, Lease: 10 * time.Second})
	if err != nil || !r2.Acquired || r2.Token <= r1.Token {
		t.Fatalf("second grant: %+v %v (first token %v)", r2, err, r1.Token)
	}
	if err := b1.Release(ctx, k, owner); !errors.Is(err, lockx.ErrNotHeld) {
		t.Fatalf("retried release = %v, want ErrNotHeld", err)
	}
	if _, err := b2.TTL(ctx, k, owner); err != nil {
		t.Fatalf("the newer grant was removed by the stale retry: %v", err)
	}
	if r, err := b1.Acquire(ctx, driver.Request{Key: k, Owner: lockx.NewOwner(), Lease: time.Second}); err != nil || r.Acquired {
		t.Fatalf("another owner acquired the key after the stale retry: %+v %v", r, err)
	}
	if err := b2.Release(ctx, k, owner); err != nil {
		t.Fatal(err)
	}
}

// TestLeasePerLock is etcd#6111 ("TTL per session, not per lock"): two
// locks of one backend with different leases each get an etcd lease of
// their own; the short one expires and goes to another client while the
// long one stays held.
func TestLeasePerLock(t *testing.T) {
	t.Parallel()
	cli := client(t, single)
	prefix := etcdlock.WithPrefix(testPrefix())
	c := lockx.New(etcdlock.New(cli, prefix))
	defer c.Close()
	short, err := c.Acquire(ctxT(t, 5*time.Second), "short", lockx.WithLease(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	long, err := c.Acquire(ctxT(t, 5*time.Second), "long", lockx.WithLease(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	raw := testPrefixOf(prefix)
	ls, ll := entryLease(t, cli, raw, "h", string(short.Owner())), entryLease(t, cli, raw, "h", string(long.Owner()))
	if ls == ll {
		t.Fatal("two locks share one etcd lease")
	}
	for id, want := range map[clientv3.LeaseID]int64{ls: 3, ll: 23} { // 20 s + 1/8
		resp, err := cli.TimeToLive(ctxT(t, 5*time.Second), id)
		if err != nil || resp.GrantedTTL != want {
			t.Fatalf("lease %x granted TTL %d (%v), want %d", id, resp.GrantedTTL, err, want)
		}
	}
	other := lockx.New(etcdlock.New(cli, prefix))
	defer other.Close()
	l2, err := other.Acquire(ctxT(t, 10*time.Second), "short", lockx.WithWait(8*time.Second))
	if err != nil {
		t.Fatalf("short lock never expired: %v", err)
	}
	if !closedWithin(short.Lost(), time.Second) {
		t.Fatal("short lock not reported lost")
	}
	if l, err := other.TryAcquire(ctxT(t, 5*time.Second), "long"); err == nil {
		t.Fatalf("long lock expired with the short one (token %v)", l.Token())
	}
	release(t, l2)
	release(t, long)
}

// testPrefixOf recovers the prefix string of a WithPrefix option.

func testPrefixOf(o etcdlock.Option) string {
	b := etcdlock.New(nil, o)
	return etcdlock.PrefixOf(b)
}

// TestFaultsCluster runs the fault scenarios on a cluster of three
// members in this process.
func TestFaultsCluster(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a 3-member cluster")
	}
	c, err := etcdtest.Start(etcdtest.Config{Members: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cli := client(t, c)
	prefix := etcdlock.WithPrefix(testPrefix())
	newClient := func() *lockx.Client {
		lc := lockx.New(etcdlock.New(cli, prefix))
		t.Cleanup(func() { _ = lc.Close() })
		return lc
	}
	holder, waiter := newClient(), newClient()

	// A member that is not the leader dies: the lock held with the
	// watchdog survives, a second client stays excluded, and the waiter
	// acquires after the release.
	t.Run("KillMember", func(t *testing.T) {
		k := "km:" + randHex(4)
		l, err := holder.Acquire(ctxT(t, 5*time.Second), k, lockx.WithWatchdog(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		var victim *etcdtest.Member
		for _, m := range c.Members {
			if m != c.Leader() {
				victim = m
				break
			}
		}
		victim.Stop()
		defer func() {
			if err := victim.Restart(); err != nil {
				t.Fatal(err)
			}
		}()
		got := acquireAsync(t, waiter, k, 15*time.Second)
		select {
		case <-l.Lost():
			t.Fatal("lock lost when a follower died")
		case l2 := <-got:
			t.Fatalf("waiter acquired a held lock (token %v)", l2.Token())
		case <-time.After(3 * time.Second):
		}
		release(t, l)
		select {
		case l2 := <-got:
			if l2 != nil {
				release(t, l2)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("waiter not granted after the release")
		}
	})

	// The leader dies: a new one is elected, leases carry over (etcd
	// renews them on promotion), the holder keeps its lock through the
	// election, and a waiter is granted after the release.
	t.Run("KillLeader", func(t *testing.T) {
		if _, err := c.WaitLeader(10 * time.Second); err != nil {
			t.Fatal(err)
		}
		if err := etcdtest.Ping(cli, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		k := "kl:" + randHex(4)
		l, err := holder.Acquire(ctxT(t, 5*time.Second), k, lockx.WithWatchdog(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		leader := c.Leader()
		leader.Stop()
		defer func() {
			if err := leader.Restart(); err != nil {
				t.Fatal(err)
			}
		}()
		got := acquireAsync(t, waiter, k, 20*time.Second, lockx.Fair())
		select {
		case <-l.Lost():
			t.Fatal("lock lost through a leader election")
		case l2 := <-got:
			t.Fatalf("waiter acquired a held lock (token %v)", l2.Token())
		case <-time.After(4 * time.Second):
		}
		if _, err := c.WaitLeader(10 * time.Second); err != nil {
			t.Fatal(err)
		}
		release(t, l)
		select {
		case l2 := <-got:
			if l2 != nil {
				if l2.Token() <= l.Token() {
					t.Fatalf("token %v not above %v across the election", l2.Token(), l.Token())
				}
				release(t, l2)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("waiter not granted after the release")
		}
	})

	// The holder's process dies (its etcd client closes without a
	// release): its lease runs out on the cluster and the waiter acquires
	// with a greater token; the holder, cut off, is told by its own clock.
	t.Run("HolderDiesLeaseExpires", func(t *testing.T) {
		if _, err := c.WaitLeader(10 * time.Second); err != nil {
			t.Fatal(err)
		}
		hcli, err := c.Client()
		if err != nil {
			t.Fatal(err)
		}
		dead := lockx.New(etcdlock.New(hcli, prefix))
		k := "hd:" + randHex(4)
		l, err := dead.Acquire(ctxT(t, 5*time.Second), k, lockx.WithLease(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		_ = hcli.Close() // the process is gone as far as etcd can tell
		start := time.Now()
		l2, err := waiter.Acquire(ctxT(t, 15*time.Second), k)
		if err != nil {
			t.Fatalf("lock of a dead holder never freed: %v", err)
		}
		t.Logf("waiter granted %v after the holder died (2 s lease)", time.Since(start).Round(time.Millisecond))
		if !closedWithin(l.Lost(), time.Second) {
			t.Fatal("dead holder's lock not reported lost")
		}
		if l2.Token() <= l.Token() {
			t.Fatalf("token %v not above %v", l2.Token(), l.Token())
		}
		release(t, l2)
		_ = dead.Close()
	})

	// Quorum is lost: no renewal can succeed, and the holder is told —
	// Lost fires by its own clock within its lease (2 s), although no
	// server can say so. This is etcd#6127 from the other side.
	t.Run("QuorumLostFiresLost", func(t *testing.T) {
		if _, err := c.WaitLeader(10 * time.Second); err != nil {
			t.Fatal(err)
		}
		if err := etcdtest.Ping(cli, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		k := "ql:" + randHex(4)
		l, err := holder.Acquire(ctxT(t, 5*time.Second), k, lockx.WithWatchdog(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		stopped := []*etcdtest.Member{c.Members[0], c.Members[1]}
		for _, m := range stopped {
			m.Stop()
		}
		lostAt := time.Now()
		if !closedWithin(l.Lost(), 4*time.Second) {
			t.Fatal("Lost did not fire with the cluster unreachable")
		}
		t.Logf("Lost %v after quorum loss", time.Since(lostAt).Round(time.Millisecond))
		for _, m := range stopped {
			if err := m.Restart(); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.WaitLeader(10 * time.Second); err != nil {
			t.Fatal(err)
		}
		l2, err := waiter.Acquire(ctxT(t, 15*time.Second), k)
		if err != nil {
			t.Fatalf("lock never freed after quorum came back: %v", err)
		}
		if l2.Token() <= l.Token() {
			t.Fatalf("token %v not above %v", l2.Token(), l.Token())
		}
		release(t, l2)
	})
}
