package faults

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/lockx/redislock"
)

// TestFaultClockStepBack steps the lock server's clock back by an hour.
// The machine's clock cannot be stepped on a shared machine, so the server
// is an embedded miniredis whose TIME (the source of redislock's tokens) the
// test sets; its keys age only when the test says so, which makes the
// tombstone window exact.
//
//   - Within the tombstone window (the key released, its tombstone alive),
//     the next token is the tombstone's + 1: monotonic despite the step.
//   - Past it — the tombstone expired, or the server restarted without
//     persistence (FLUSHALL) — the next token is drawn from the stepped-back
//     clock and is SMALLER than the last one: monotonic tokens are not
//     guaranteed. The resource-side check still holds: the fence refuses the
//     new holder's lower token (lockx.ErrStaleToken), so the register never
//     goes back; the new holder is refused until the clock passes the old
//     token, and a write from the superseded holder (higher token) is still
//     accepted — fencing orders writes by token, it cannot tell which holder
//     is current once the tokens disagree with the grants.
func TestFaultClockStepBack(t *testing.T) {
	for _, tc := range []struct {
		name     string
		forget   func(mr *miniredis.Miniredis, l *lockx.Lock)
		monotone bool
	}{
		{"within-tombstone", func(mr *miniredis.Miniredis, l *lockx.Lock) {
			if err := l.Release(context.Background()); err != nil {
				t.Fatal(err)
			}
			mr.FastForward(time.Second) // tombstone window 2 s: still alive
		}, true},
		{"tombstone-expired", func(mr *miniredis.Miniredis, l *lockx.Lock) {
			if err := l.Release(context.Background()); err != nil {
				t.Fatal(err)
			}
			mr.FastForward(3 * time.Second)
		}, false},
		{"restart-without-persistence", func(mr *miniredis.Miniredis, _ *lockx.Lock) {
			mr.FlushAll() // the holder's lock and every tombstone gone
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mr := miniredis.RunT(t)
			now := time.Now()
			mr.SetTime(now)
			rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
			t.Cleanup(func() { rdb.Close() })
			// Two clients, as two processes would be; no watchdog renewals
			// race the test's clock changes (long lease, no auto-renew
			// needed within the test).
			a := lockx.New(redislock.New(rdb, redislock.WithTombstone(2*time.Second)))
			b := lockx.New(redislock.New(rdb, redislock.WithTombstone(2*time.Second)))
			t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
			fence := memlock.NewFenceStore() // the resource, never faulted
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			const res = "register"

			la, err := a.TryAcquire(ctx, "k", lockx.WithLease(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			ta := la.Token()
			if err := fence.Fence(ctx, res, ta); err != nil {
				t.Fatalf("A's write refused: %v", err)
			}
			tc.forget(mr, la)
			mr.SetTime(now.Add(-time.Hour)) // the server's clock steps back

			lb, err := b.TryAcquire(ctx, "k", lockx.WithLease(time.Minute))
			if err != nil {
				t.Fatalf("B: %v", err)
			}
			defer lb.Release(ctx)
			tb := lb.Token()
			t.Logf("token before the step %d, after %d", ta, tb)
			errB := fence.Fence(ctx, res, tb)
			if tc.monotone {
				if tb <= ta {
					t.Fatalf("token went back within the tombstone window: %d after %d", tb, ta)
				}
				if errB != nil {
					t.Fatalf("B's write refused: %v", errB)
				}
				return
			}
			if tb >= ta {
				t.Fatalf("token %d after %d: the clock step did not reach the token (is the test still stepping the server's clock?)", tb, ta)
			}
			// Resource-side check: the lower token is refused, the register
			// keeps A's write.
			if !errors.Is(errB, lockx.ErrStaleToken) {
				t.Fatalf("fence accepted B's lower token %d after %d: %v", tb, ta, errB)
			}
			if seen := fence.Seen(res); seen != ta {
				t.Fatalf("register went back: seen %d, want %d", seen, ta)
			}
			// The superseded holder's token is still the highest: its write
			// is accepted. That is the limit of fencing under a clock step.
			if err := fence.Fence(ctx, res, ta); err != nil {
				t.Fatalf("A's second write: %v", err)
			}
		})
	}
}
