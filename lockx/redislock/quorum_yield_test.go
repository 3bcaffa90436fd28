package redislock_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/redislock"
)

// TestQuorumFairAttemptKeepsPlace follows, step by step, what made the
// Redlock FairOrder conformance test fail now and then: a holder's release
// reaches the nodes one at a time, the first waiter tries as soon as one
// node has handed it the lock, and a majority still refuses. Giving that
// grant back with an ordinary release handed it on to the second waiter,
// so after two such rounds the second waiter held a majority and the first
// had lost its place. A failed fair attempt that is first in line on a
// majority now yields its grants and stays at the head of the queues.
func TestQuorumFairAttemptKeepsPlace(t *testing.T) {
	srv := startNodes(t, 3)
	addrs := addrsOf(srv)
	cs := nodeClients(t, addrs...)
	prefix := testPrefix()
	q := redislock.NewQuorum(cs, redislock.WithPrefix(prefix), redislock.WithNodeTimeout(quorumNodeTimeout))
	t.Cleanup(func() { _ = q.Close() })
	ctx := ctxT(t, 20*time.Second)
	key := "keeps-place-" + randHex(4)
	holder, first, second := lockx.NewOwner(), lockx.NewOwner(), lockx.NewOwner()
	fair := func(o lockx.Owner) driver.Request {
		r := req(key, o, 10*time.Second)
		r.Fair, r.Wait, r.QueueTTL = true, true, 10*time.Second
		return r
	}
	attempt := func(r driver.Request) driver.Result {
		t.Helper()
		res, err := q.Acquire(ctx, r)
		if err != nil {
			t.Fatalf("Acquire(%s): %v", r.Owner, err)
		}
		return res
	}
	// queued waits until every node's fair queue has n entries: a quorum
	// attempt is decided by a majority, the last node may answer later.
	queued := func(n int64) {
		t.Helper()
		for i, a := range addrs {
			rdb := clientAt(t, a)
			for {
				got, err := rdb.ZCard(ctx, prefix+"{"+key+"}:q").Result()
				if err != nil {
					t.Fatalf("node %d: %v", i, err)
				}
				if got == n {
					break
				}
				select {
				case <-ctx.Done():
					t.Fatalf("node %d: %d queued, want %d", i, got, n)
				case <-time.After(time.Millisecond):
				}
			}
		}
	}
	if !attempt(req(key, holder, 10*time.Second)).Acquired {
		t.Fatal("the holder was refused a free key")
	}
	if attempt(fair(first)).Acquired {
		t.Fatal("the first waiter was granted a held key")
	}
	queued(1)
	if attempt(fair(second)).Acquired {
		t.Fatal("the second waiter was granted a held key")
	}
	queued(2)

	// The holder's release reaches node 0 alone: it hands the lock to the
	// first waiter, whose attempt the other two nodes still refuse.
	releaseOn := func(i int) {
		t.Helper()
		if err := backend(t, cs[i], redislock.WithPrefix(prefix)).Release(ctx, key, holder); err != nil {
			t.Fatalf("release on node %d: %v", i, err)
		}
	}
	releaseOn(0)
	if attempt(fair(first)).Acquired {
		t.Fatal("granted with one node of three")
	}
	// Then node 1: the first waiter is still first on nodes 0 and 1.
	releaseOn(1)
	if !attempt(fair(first)).Acquired {
		t.Fatal("the first waiter was refused once a majority had released: its failed attempt gave its place away")
	}
	if attempt(fair(second)).Acquired {
		t.Fatal("the second waiter was granted while the first holds the lock")
	}
	if err := q.Release(context.Background(), key, first); err != nil {
		t.Fatal(err)
	}
	if err := q.Release(context.Background(), key, second); err != nil && err != lockx.ErrNotHeld {
		t.Fatal(err)
	}
}
