package pglock_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
)

// TestSemaphoreHandOverStartsOwnWaitersLease: permits a release hands over
// to a waiter its own Backend queued, with a lease a watchdog renews, start
// their lease at once (the row's expiry is the lease, not the queue
// entry's), and the waiter's next attempt is granted that token with at
// most the lease left. A waiter another Backend queued, or one whose lease
// no watchdog renews, keeps the queue entry's expiry until it confirms.
func TestSemaphoreHandOverStartsOwnWaitersLease(t *testing.T) {
	e := newEnv(t, 24)
	ctx := ctxT(t, 30*time.Second)
	b1, b2 := e.backend(t), e.backend(t)
	const lease, queueTTL = time.Minute, 5 * time.Second
	held := `SELECT (extract(epoch FROM expires - clock_timestamp()) * 1000)::int8, token FROM ` +
		pgx.Identifier{e.schema, "lockx_pattern_held"}.Sanitize() + ` WHERE owner = $1`
	for _, tc := range []struct {
		name    string
		waiter  driver.SemaphoreBackend // queues the waiter
		renewed bool
		started bool
	}{
		{"own waiter", b1, true, true},
		{"another Backend's waiter", b2, true, false},
		{"own waiter without a watchdog", b1, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := "sem-started-" + randHex(4)
			req := func(o lockx.Owner, wait, renewed bool) driver.PermitRequest {
				return driver.PermitRequest{Request: driver.Request{Key: k, Owner: o, Lease: lease, Fair: true, Wait: wait,
					QueueTTL: queueTTL, Renewed: renewed}, Limit: 1, Count: 1}
			}
			a, w := lockx.NewOwner(), lockx.NewOwner()
			if res, err := b1.AcquirePermits(ctx, req(a, false, true)); err != nil || !res.Acquired {
				t.Fatalf("holder: %+v %v", res, err)
			}
			if res, err := tc.waiter.AcquirePermits(ctx, req(w, true, tc.renewed)); err != nil || res.Acquired {
				t.Fatalf("waiter: %+v %v, want queued", res, err)
			}
			if err := b1.ReleasePermits(ctx, k, a); err != nil {
				t.Fatal(err)
			}
			var left, token int64
			if err := e.pool.QueryRow(ctx, held, []byte(w)).Scan(&left, &token); err != nil {
				t.Fatalf("the waiter's row after the release: %v", err)
			}
			if started := time.Duration(left)*time.Millisecond > queueTTL; started != tc.started {
				t.Fatalf("row expires in %d ms after the hand-over; want the lease started: %v", left, tc.started)
			}
			res, err := tc.waiter.AcquirePermits(ctx, req(w, true, tc.renewed))
			if err != nil || !res.Acquired || int64(res.Token) != token {
				t.Fatalf("waiter's next attempt: %+v %v, want granted token %d", res, err, token)
			}
			// Taken here, the grant carries the lease left since the
			// release was sent; confirmed, a full lease.
			if res.TTL > lease || res.TTL < lease-10*time.Second || (res.TTL < lease) != tc.started {
				t.Fatalf("granted TTL %v, want the lease %v (less what has passed since the hand-over: %v)", res.TTL, lease, tc.started)
			}
			if err := e.pool.QueryRow(ctx, held, []byte(w)).Scan(&left, &token); err != nil || time.Duration(left)*time.Millisecond <= queueTTL {
				t.Fatalf("the granted row expires in %d ms (%v), want its lease", left, err)
			}
			if err := tc.waiter.ReleasePermits(ctx, k, w); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestSemaphoreShortRefusal: while a Backend has a waiter queued on a key,
// its attempts on the key first try the short refusal (sqlQueuePermits),
// which must answer exactly as the full decision would: a request that
// cannot fit is refused with the earliest lease's remaining time and
// queued behind the waiter; one that fits the permits in use but not the
// fair queue ahead of it is refused by the full decision; a request that
// fits (not fair: the queue ahead does not count) is granted, and a
// holder's repeat renews its permits.
func TestSemaphoreShortRefusal(t *testing.T) {
	e := newEnv(t, 24)
	ctx := ctxT(t, 30*time.Second)
	b := e.backend(t)
	k := "sem-short-" + randHex(4)
	const lease = time.Minute
	req := func(o lockx.Owner, count int64, fair, wait bool) driver.PermitRequest {
		return driver.PermitRequest{Request: driver.Request{Key: k, Owner: o, Lease: lease, Fair: fair, Wait: wait,
			QueueTTL: 5 * time.Second}, Limit: 3, Count: count}
	}
	usage := func() driver.PermitUsage {
		t.Helper()
		u, err := b.Permits(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	a, w, c, d := lockx.NewOwner(), lockx.NewOwner(), lockx.NewOwner(), lockx.NewOwner()
	if res, err := b.AcquirePermits(ctx, req(a, 1, true, false)); err != nil || !res.Acquired {
		t.Fatalf("holder: %+v %v", res, err)
	}
	// w asks for 3 of 3 while a holds 1: queued, and from now on the
	// Backend has a waiter on the key.
	if res, err := b.AcquirePermits(ctx, req(w, 3, true, true)); err != nil || res.Acquired {
		t.Fatalf("waiter: %+v %v, want queued", res, err)
	}
	// c asks for 3: cannot fit the permit in use, refused by the short
	// statement, with a's lease left, and queued behind w.
	res, err := b.AcquirePermits(ctx, req(c, 3, true, true))
	if err != nil || res.Acquired || res.TTL <= lease-10*time.Second || res.TTL > lease {
		t.Fatalf("c: %+v %v, want refused with about %v left", res, err, lease)
	}
	if u := usage(); u.InUse != 1 || u.Waiting != 2 {
		t.Fatalf("usage %+v, want 1 in use and 2 waiting", u)
	}
	// d asks for 1, fair: it fits the permits in use, so the full decision
	// decides, and refuses it for the waiters ahead.
	if res, err := b.AcquirePermits(ctx, req(d, 1, true, false)); err != nil || res.Acquired {
		t.Fatalf("fair d: %+v %v, want refused for the queue ahead", res, err)
	}
	// Not fair, the queue ahead does not count: granted.
	res, err = b.AcquirePermits(ctx, req(d, 1, false, false))
	if err != nil || !res.Acquired {
		t.Fatalf("d without Fair: %+v %v, want granted", res, err)
	}
	// a's repeat renews its permit instead of being refused.
	if res, err := b.AcquirePermits(ctx, req(a, 1, true, false)); err != nil || !res.Acquired {
		t.Fatalf("holder's repeat: %+v %v, want renewed", res, err)
	}
	if u := usage(); u.InUse != 2 || u.Waiting != 2 {
		t.Fatalf("usage %+v, want 2 in use and 2 waiting", u)
	}
	// Both holders leave: w (3) is handed the permits first, then c waits
	// for w.
	for _, o := range []lockx.Owner{a, d} {
		if err := b.ReleasePermits(ctx, k, o); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := b.AcquirePermits(ctx, req(w, 3, true, true)); err != nil || !res.Acquired {
		t.Fatalf("w after the releases: %+v %v, want granted", res, err)
	}
	if res, err := b.AcquirePermits(ctx, req(c, 3, true, true)); err != nil || res.Acquired {
		t.Fatalf("c while w holds: %+v %v, want refused", res, err)
	}
	for _, o := range []lockx.Owner{w, c} {
		if err := b.ReleasePermits(ctx, k, o); err != nil && o == w {
			t.Fatal(err)
		}
	}
}
