package memlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/lockxtest"
	"github.com/lockx-go/lockx/lockx/memlock"
)

func TestConformanceMany(t *testing.T) {
	b := memlock.New() // one store shared by every client, like one server
	lockxtest.RunMany(t, func(*testing.T) driver.Backend { return b })
}

// TestAcquireManyBackend checks the Backend's ManyAcquirer and ManyReleaser
// contract: all or nothing, a token per key, idempotent per owner, fair
// waiters respected, bad input refused.
func TestAcquireManyBackend(t *testing.T) {
	ctx := context.Background()
	b := memlock.New()
	a, x := lockx.NewOwner(), lockx.NewOwner()
	reqs := func(o lockx.Owner, keys ...string) []driver.Request {
		rs := make([]driver.Request, len(keys))
		for i, k := range keys {
			rs[i] = driver.Request{Key: k, Owner: o, Lease: time.Minute}
		}
		return rs
	}
	set := reqs(a, "k1", "k2", "k3", "k4")
	res, err := b.AcquireMany(ctx, set)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[lockx.Token]bool{}
	for i, r := range res {
		if !r.Acquired || r.Token == 0 || seen[r.Token] || r.TTL != time.Minute {
			t.Fatalf("result %d = %+v, want a grant with a token of its own", i, r)
		}
		seen[r.Token] = true
		if got, _ := b.Acquire(ctx, driver.Request{Key: set[i].Key, Owner: x, Lease: time.Second}); got.Acquired {
			t.Fatalf("%s granted to another owner while the set holds it", set[i].Key)
		}
	}
	again, err := b.AcquireMany(ctx, set)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range again {
		if !r.Acquired || r.Token != res[i].Token {
			t.Fatalf("re-grant %d = %+v, want token %d", i, r, res[i].Token)
		}
	}
	for i, err := range b.ReleaseMany(ctx, []string{"k1", "k2", "k3", "k4", "never"}, a) {
		if want := i == 4; (err != nil) != want || want && !errors.Is(err, lockx.ErrNotHeld) {
			t.Fatalf("ReleaseMany %d: %v", i, err)
		}
	}

	// One member held by another owner: nothing granted, the holder's lease
	// reported for it, the rest left free.
	if got, _ := b.Acquire(ctx, driver.Request{Key: "k3", Owner: x, Lease: 30 * time.Second}); !got.Acquired {
		t.Fatal("k3 not granted to x")
	}
	res, err = b.AcquireMany(ctx, set)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Acquired {
			t.Fatalf("result %d granted although k3 is held", i)
		}
	}
	if ttl := res[2].TTL; ttl <= 25*time.Second || ttl > 30*time.Second {
		t.Fatalf("refused member's TTL %v, want the holder's remaining lease", ttl)
	}
	for _, k := range []string{"k1", "k2", "k4"} {
		got, _ := b.Acquire(ctx, driver.Request{Key: k, Owner: x, Lease: time.Second})
		if !got.Acquired {
			t.Fatalf("%s left held by a refused set", k)
		}
		_ = b.Release(ctx, k, x)
	}
	_ = b.Release(ctx, "k3", x)

	// A free key with a live fair waiter goes to the waiter, not to the set.
	if got, _ := b.Acquire(ctx, driver.Request{Key: "k2", Owner: x, Lease: time.Minute}); !got.Acquired {
		t.Fatal("k2 not granted to x")
	}
	w := lockx.NewOwner()
	if got, _ := b.Acquire(ctx, driver.Request{Key: "k2", Owner: w, Lease: time.Minute, Fair: true, Wait: true, QueueTTL: time.Minute}); got.Acquired {
		t.Fatal("fair waiter granted a held key")
	}
	_ = b.Release(ctx, "k2", x)
	res, err = b.AcquireMany(ctx, set)
	if err != nil {
		t.Fatal(err)
	}
	if res[1].Acquired || res[1].TTL != 0 || res[0].Acquired {
		t.Fatalf("set granted past a live fair waiter: %+v", res)
	}
	_ = b.Release(ctx, "k2", w) // the waiter withdraws

	// Duplicate keys: granted once, with one token.
	res, err = b.AcquireMany(ctx, reqs(a, "d", "d"))
	if err != nil || !res[0].Acquired || !res[1].Acquired || res[0].Token != res[1].Token {
		t.Fatalf("duplicate keys: %+v, %v", res, err)
	}
	_ = b.ReleaseMany(ctx, []string{"d"}, a)

	// Bad input.
	mixed := append(reqs(a, "m1"), reqs(x, "m2")...)
	if _, err := b.AcquireMany(ctx, mixed); !errors.Is(err, lockx.ErrInvalidArgument) {
		t.Fatalf("two owners: %v", err)
	}
	waiting := reqs(a, "m1")
	waiting[0].Wait = true
	if _, err := b.AcquireMany(ctx, waiting); !errors.Is(err, lockx.ErrInvalidArgument) {
		t.Fatalf("a waiting request: %v", err)
	}
}
