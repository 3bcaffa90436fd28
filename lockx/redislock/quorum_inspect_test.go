package redislock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/redislock"
)

// TestQuorumInspect: a Quorum names the holder a majority of its nodes
// name, with the grant's token and the time a majority still holds it; a
// hold on a minority of nodes is no lock; too few nodes answering is
// ErrUnavailable, not ErrNotHeld.
func TestQuorumInspect(t *testing.T) {
	srv := startNodes(t, 3)
	cs := nodeClients(t, addrsOf(srv)...)
	prefix := testPrefix()
	q := redislock.NewQuorum(cs, redislock.WithPrefix(prefix), redislock.WithNodeTimeout(quorumNodeTimeout))
	t.Cleanup(func() { _ = q.Close() })
	var in driver.Inspector
	if !driver.As(q, &in) {
		t.Fatal("a Quorum is no driver.Inspector")
	}
	ctx := ctxT(t, 20*time.Second)
	key, owner := "inspect-"+randHex(4), lockx.NewOwner()
	if _, err := in.Lock(ctx, key); !errors.Is(err, lockx.ErrNotHeld) {
		t.Fatalf("Lock of a free key = %v, want ErrNotHeld", err)
	}
	res, err := q.Acquire(ctx, req(key, owner, 10*time.Second))
	if err != nil || !res.Acquired {
		t.Fatalf("Acquire: %+v %v", res, err)
	}
	li, err := in.Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if li.Key != key || li.Owner != owner || li.Token != res.Token || li.TTL <= 0 || li.TTL > 10*time.Second {
		t.Fatalf("Lock = %+v, want key %q, owner %s, token %d and a TTL within the lease", li, key, owner, res.Token)
	}

	// Another key held on one node only (a partial grant) is listed by that
	// node but is no lock of the quorum.
	partial := "inspect-partial-" + randHex(4)
	mustGrant(t, backend(t, cs[0], redislock.WithPrefix(prefix)), req(partial, lockx.NewOwner(), 10*time.Second))
	if _, err := in.Lock(ctx, partial); !errors.Is(err, lockx.ErrNotHeld) {
		t.Fatalf("Lock of a key held on 1 node of 3 = %v, want ErrNotHeld", err)
	}
	var listed []driver.LockInfo
	if err := in.Locks(ctx, "inspect-", func(li driver.LockInfo) bool {
		listed = append(listed, li)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if len(listed) != 1 || listed[0].Key != key || listed[0].Owner != owner || listed[0].Token != res.Token {
		t.Fatalf("Locks = %+v, want the one quorum lock %q", listed, key)
	}

	// Two of three nodes gone: nobody can tell who holds the key.
	srv[1].Kill()
	srv[2].Kill()
	if _, err := in.Lock(ctx, key); !errors.Is(err, lockx.ErrUnavailable) {
		t.Fatalf("Lock with 1 node of 3 = %v, want ErrUnavailable", err)
	}
	if err := in.Locks(ctx, "", func(driver.LockInfo) bool { return true }); !errors.Is(err, lockx.ErrUnavailable) {
		t.Fatalf("Locks with 1 node of 3 = %v, want ErrUnavailable", err)
	}
}
