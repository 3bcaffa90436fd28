package pglock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/pglock"
)

// heldRow reads key's row in env's lock table: its owner, and whether it
// is unexpired. ok is false when there is no row.
func heldRow(t *testing.T, e *env, key string) (owner string, live, ok bool) {
	t.Helper()
	q := `SELECT owner, expires > clock_timestamp() FROM ` + pgx.Identifier{e.schema, "lockx_held"}.Sanitize() + ` WHERE key = $1`
	var o []byte
	err := e.pool.QueryRow(context.Background(), q, []byte(key)).Scan(&o, &live)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(o), live, true
}

// TestPublishDelay: a hold released within the publish delay writes no row;
// a longer one writes its row (with its owner and an unexpired lease) once
// the delay has passed, and its release marks the row released.
func TestPublishDelay(t *testing.T) {
	e := newEnv(t, 20)
	const delay = 30 * time.Millisecond
	c, _ := e.client(t, pglock.WithPublishDelay(delay))
	ctx := ctxT(t, 20*time.Second)

	short, err := c.Acquire(ctx, "short")
	if err != nil {
		t.Fatal(err)
	}
	if err := short.Release(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * delay)
	if _, _, ok := heldRow(t, e, "short"); ok {
		t.Fatal("a hold released within the publish delay wrote its row")
	}

	long, err := c.Acquire(ctx, "long")
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		owner, live, ok := heldRow(t, e, "long")
		if ok && owner == string(long.Owner()) && live {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no live row naming the holder 5 s after the grant (row: %q live %v present %v)", owner, live, ok)
		}
		time.Sleep(delay / 3)
	}
	if err := long.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, live, ok := heldRow(t, e, "long"); !ok || live {
		t.Fatalf("after release: row present %v, unexpired %v; want present and marked released", ok, live)
	}
}

// TestStaleRowNotAnOwner: owner A's row is published, A releases, and B of
// the same Backend takes the key on the same session before B's row is
// written. Another Backend must not take A's old row for a hold: A's
// release, TTL and extend through it get ErrNotHeld, and Lock names B once
// B's row is written. Without the release marking A's row released, A's row
// would name A on a session that holds the key, and all three would
// succeed for A.
func TestStaleRowNotAnOwner(t *testing.T) {
	e := newEnv(t, 20)
	const delay = 300 * time.Millisecond // B stays unpublished while the checks run
	holder := e.backend(t, pglock.WithPublishDelay(delay), pglock.WithSessions(1))
	// A reader looks again for as long as its own publish delay allows:
	// processes that share locks use one delay.
	other := e.backend(t, pglock.WithPublishDelay(delay), pglock.WithSessions(1))
	ctx := ctxT(t, 20*time.Second)
	req := func(owner driver.Owner) driver.Request {
		return driver.Request{Key: "k", Owner: owner, Lease: 10 * time.Second}
	}
	if r, err := holder.Acquire(ctx, req("owner-a")); err != nil || !r.Acquired {
		t.Fatal(r, err)
	}
	if err := holder.Extend(ctx, "k", "owner-a", 10*time.Second); err != nil { // publishes A's row
		t.Fatal(err)
	}
	if _, live, ok := heldRow(t, e, "k"); !ok || !live {
		t.Fatal("A's first Extend did not write its row")
	}
	if err := holder.Release(ctx, "k", "owner-a"); err != nil {
		t.Fatal(err)
	}
	if r, err := holder.Acquire(ctx, req("owner-b")); err != nil || !r.Acquired {
		t.Fatal(r, err)
	}
	start := time.Now()
	if _, err := other.TTL(ctx, "k", "owner-a"); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("TTL of A through another Backend: %v, want ErrNotHeld", err)
	}
	if err := other.Extend(ctx, "k", "owner-a", time.Second); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("Extend of A through another Backend: %v, want ErrNotHeld", err)
	}
	if err := other.Release(ctx, "k", "owner-a"); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("Release of A through another Backend: %v, want ErrNotHeld", err)
	}
	t.Logf("three checks of a stale owner took %v", time.Since(start))
	li, err := other.Lock(ctx, "k")
	if err != nil || li.Owner != "owner-b" {
		t.Fatalf("Lock = %+v, %v; want owner-b", li, err)
	}
	if err := holder.Release(ctx, "k", "owner-b"); err != nil {
		t.Fatal(err)
	}
}

// TestYoungHoldCheckedRemotely: the owner of a hold younger than the
// publish delay is recognised through another Backend (which looks again
// until the row is written): TTL and force-release succeed, and the holder
// then finds its lock lost.
func TestYoungHoldCheckedRemotely(t *testing.T) {
	e := newEnv(t, 20)
	// Every process that shares locks uses one delay: another Backend's
	// owner check looks for a young hold's row for about twice its own.
	const delay = 50 * time.Millisecond
	c, _ := e.client(t, pglock.WithPublishDelay(delay))
	other := e.backend(t, pglock.WithPublishDelay(delay))
	ctx := ctxT(t, 20*time.Second)
	l, err := c.Acquire(ctx, "young")
	if err != nil {
		t.Fatal(err)
	}
	if d, err := other.TTL(ctx, "young", l.Owner()); err != nil || d <= 0 {
		t.Fatalf("TTL through another Backend right after the grant: %v, %v", d, err)
	}
	if err := other.Release(ctx, "young", l.Owner()); err != nil {
		t.Fatalf("force-release through another Backend: %v", err)
	}
	if err := l.Extend(ctx, 10*time.Second); !errors.Is(err, lockx.ErrNotHeld) {
		t.Fatalf("the holder's Extend after a force-release: %v", err)
	}
}

func TestPublishDelayOption(t *testing.T) {
	e := newEnv(t, 4)
	for _, d := range []time.Duration{-time.Millisecond, 2 * time.Second} {
		b := pglock.New(e.pool, pglock.WithPublishDelay(d))
		_, err := b.Acquire(context.Background(), driver.Request{Key: "k", Owner: "o", Lease: time.Second})
		var ae *driver.ArgError
		if !errors.As(err, &ae) {
			t.Errorf("WithPublishDelay(%v): %v, want an ArgError", d, err)
		}
		_ = b.Close()
	}
}
