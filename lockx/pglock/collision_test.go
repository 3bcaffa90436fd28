package pglock_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/pglock"
)

// Two keys with one advisory-lock id (forced by WithKeyID, as a crafted
// FNV-1a pair would be): while one is held, an attempt on the other is
// refused with ErrKeyCollision — through another Backend (the holder's row
// names the other key), through the holder's own Backend (its memory does),
// and by a waiter: it queues on its wait session, and the try after its
// wait slice sees the collision, so it returns long before its wait budget.
// Without the check (the refusal's collision column ignored in granted and
// the in-process check removed) every attempt is a plain refusal: the
// subtests fail with ErrNotAcquired and the waiter waits out its budget.
func TestKeyCollisionRefused(t *testing.T) {
	e := newEnv(t, 20)
	id := rand.Int64()
	same := pglock.WithKeyID(func(string) int64 { return id })
	holder, hb := e.client(t, same)
	other, ob := e.client(t, same, pglock.WithWaitSlice(100*time.Millisecond))
	ctx := ctxT(t, 30*time.Second)
	// A waiting Acquire connects other's wait session.
	warm, err := other.Acquire(ctx, "warm")
	if err != nil {
		t.Fatal(err)
	}
	if err := warm.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for {
		if _, wait, _ := ob.Connected(); wait == 1 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("no wait session")
		}
		time.Sleep(10 * time.Millisecond)
	}
	l, err := holder.Acquire(ctx, "tenant-a/orders")
	if err != nil {
		t.Fatal(err)
	}
	// Another process tells a collision by the holder's row, written once
	// the hold has lasted the publish delay (WithPublishDelay); Lock
	// returns when it is.
	if li, err := hb.Lock(ctx, "tenant-a/orders"); err != nil || li.Owner != l.Owner() {
		t.Fatalf("Lock = %+v, %v", li, err)
	}
	t.Run("another Backend", func(t *testing.T) {
		_, err := other.TryAcquire(ctx, "tenant-b/crafted")
		if !errors.Is(err, pglock.ErrKeyCollision) {
			t.Fatalf("got %v, want ErrKeyCollision", err)
		}
	})
	t.Run("the same Backend", func(t *testing.T) {
		_, err := holder.TryAcquire(ctx, "tenant-b/crafted")
		if !errors.Is(err, pglock.ErrKeyCollision) {
			t.Fatalf("got %v, want ErrKeyCollision", err)
		}
	})
	// The held key itself is a plain refusal; it also marks the id as
	// contended in other's Backend, so that its next waiter goes straight
	// to the wait session and blocks there.
	if _, err := other.TryAcquire(ctx, "tenant-a/orders"); !errors.Is(err, lockx.ErrNotAcquired) {
		t.Fatalf("the held key itself: got %v, want ErrNotAcquired", err)
	}
	t.Run("a waiter", func(t *testing.T) {
		const budget = 20 * time.Second
		start := time.Now()
		_, err := other.Acquire(ctx, "tenant-b/crafted", lockx.WithWait(budget))
		if !errors.Is(err, pglock.ErrKeyCollision) {
			t.Fatalf("got %v after %v, want ErrKeyCollision", err, time.Since(start))
		}
		t.Logf("refused after %v", time.Since(start))
	})
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l2, err := other.TryAcquire(ctx, "tenant-b/crafted")
	if err != nil {
		t.Fatalf("the colliding key once the other is released: %v", err)
	}
	if err := l2.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// With WithKeySecret two Backends sharing the secret exclude each other on
// a key, and a Backend with another secret maps the key elsewhere.
func TestKeySecret(t *testing.T) {
	e := newEnv(t, 20)
	secret := []byte("0123456789abcdef-deployment")
	a, _ := e.client(t, pglock.WithKeySecret(secret))
	b, _ := e.client(t, pglock.WithKeySecret(secret))
	c, _ := e.client(t, pglock.WithKeySecret([]byte("another deployment's secret")))
	ctx := ctxT(t, 20*time.Second)
	l, err := a.Acquire(ctx, "keyed")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Release(context.Background()) }()
	if _, err := b.TryAcquire(ctx, "keyed"); !errors.Is(err, lockx.ErrNotAcquired) {
		t.Fatalf("same secret: got %v, want ErrNotAcquired", err)
	}
	lc, err := c.TryAcquire(ctx, "keyed")
	if err != nil {
		t.Fatalf("another secret maps the key to another id: %v", err)
	}
	_ = lc.Release(context.Background())
	if _, err := pglock.New(e.pool, pglock.WithKeySecret([]byte("short"))).Acquire(ctx, driver.Request{Key: "k", Owner: lockx.NewOwner(), Lease: time.Second}); err == nil {
		t.Fatal("a secret of 5 bytes was accepted")
	}
}
