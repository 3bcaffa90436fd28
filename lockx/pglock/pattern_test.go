package pglock_test

import (
	"testing"
	"time"

	"github.com/lockx-go/lockx/internal/backendtest"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/pglock"
	"github.com/lockx-go/lockx/patterns/rwlock/rwlocktest"
	"github.com/lockx-go/lockx/patterns/semaphore/semaphoretest"
)

// patternBackend returns a factory of Backends on one schema, each with one
// holder session, as separate processes would have.
func patternBackend(e *env) func(t *testing.T) driver.Backend {
	return func(t *testing.T) driver.Backend {
		b := pglock.New(e.pool, pglock.WithSchema(e.schema), pglock.WithSessions(1))
		t.Cleanup(func() { _ = b.Close() })
		if err := b.Connect(ctxT(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
		return b
	}
}

func TestRWConformance(t *testing.T) {
	e := newEnv(t, 40)
	rwlocktest.Run(t, patternBackend(e))
}

func TestSemaphoreConformance(t *testing.T) {
	e := newEnv(t, 40)
	semaphoretest.Run(t, patternBackend(e))
}

// TestSemaphoreAcrossProcesses has several Backends (processes), each with
// several goroutines whose decisions it combines, take weighted permits of
// one semaphore: the limit is never exceeded at any moment.
func TestSemaphoreAcrossProcesses(t *testing.T) {
	e := newEnv(t, 24)
	backendtest.SemaphoreContention(t, func() *lockx.Client {
		c, _ := e.client(t, pglock.WithSessions(1))
		return c
	}, 3, 3, 4, 8, true)
}

// TestSemaphoreShrinkStopsHandOverOnAnyPath: a grant handed over under the
// limit its owner queued with, which the owner has lowered since, is not
// granted by the owner's next decision either — also when that decision is
// not preceded by a confirmation (here: through a Backend that did not
// queue the owner, so it has no notification to confirm against).
func TestSemaphoreShrinkStopsHandOverOnAnyPath(t *testing.T) {
	e := newEnv(t, 24)
	ctx := ctxT(t, 30*time.Second)
	b1, b2 := e.backend(t), e.backend(t)
	k := "sem-shrink-any-" + randHex(4)
	req := func(o lockx.Owner, limit int64, wait bool) driver.PermitRequest {
		return driver.PermitRequest{Request: driver.Request{Key: k, Owner: o, Lease: 10 * time.Second, Wait: wait, QueueTTL: 10 * time.Second}, Limit: limit, Count: 1}
	}
	a, b, w := lockx.NewOwner(), lockx.NewOwner(), lockx.NewOwner()
	for _, o := range []lockx.Owner{a, b} {
		if res, err := b1.AcquirePermits(ctx, req(o, 2, false)); err != nil || !res.Acquired {
			t.Fatalf("holder: %+v %v", res, err)
		}
	}
	if res, err := b1.AcquirePermits(ctx, req(w, 2, true)); err != nil || res.Acquired {
		t.Fatalf("waiter with the limit 2: %+v %v, want queued", res, err)
	}
	if err := b1.ReleasePermits(ctx, k, a); err != nil { // hands a's permit over to w (limit 2)
		t.Fatal(err)
	}
	// w's next attempt, with the limit lowered to 1, through a Backend with
	// no notification for it: b holds the one permit the limit allows.
	res, err := b2.AcquirePermits(ctx, req(w, 1, true))
	if err != nil {
		t.Fatal(err)
	}
	if res.Acquired {
		t.Fatalf("granted (token %d) beside a holder after the limit went down to 1", res.Token)
	}
	if err := b1.ReleasePermits(ctx, k, b); err != nil {
		t.Fatal(err)
	}
	res, err = b2.AcquirePermits(ctx, req(w, 1, true))
	if err != nil || !res.Acquired {
		t.Fatalf("not granted once usage dropped below the new limit: %+v %v", res, err)
	}
	_ = b2.ReleasePermits(ctx, k, w)
}
