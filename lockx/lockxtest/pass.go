package lockxtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockx-go/lockx/internal/suitekit"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
)

// testPass checks driver.Passer's contract, for a backend that offers it:
// a pass moves the lock to the next owner with a larger token; a pass by a
// non-holder grants nothing; and with a fair waiter queued at the backend
// a pass releases instead, so that the waiter is granted next.
func (s *suite) testPass(t *testing.T) {
	k := suitekit.Key(t)
	b := s.newBackend(t)
	t.Cleanup(func() { _ = b.Close() })
	var p driver.Passer
	if !driver.As(b, &p) {
		t.Skip("backend does not implement driver.Passer")
	}
	ctx := suitekit.CtxT(t, 10*time.Second)
	lease := 10 * time.Second
	a, bo, c := lockx.NewOwner(), lockx.NewOwner(), lockx.NewOwner()
	ra, err := b.Acquire(ctx, driver.Request{Key: k, Owner: a, Lease: lease})
	if err != nil || !ra.Acquired {
		t.Fatalf("Acquire = %+v, %v", ra, err)
	}
	rb, err := p.Pass(ctx, k, a, bo, lease)
	if err != nil || !rb.Acquired || rb.Token <= ra.Token || rb.TTL <= 0 {
		t.Fatalf("Pass = %+v, %v; want a grant with a token above %d", rb, err, ra.Token)
	}
	if err := b.Extend(ctx, k, a, lease); !errors.Is(err, lockx.ErrNotHeld) {
		t.Fatalf("the passer still holds the key after the pass: Extend = %v", err)
	}
	if ttl, err := b.TTL(ctx, k, bo); err != nil || ttl <= 0 {
		t.Fatalf("TTL of the new holder = %v, %v", ttl, err)
	}
	if r, err := p.Pass(ctx, k, a, c, lease); !errors.Is(err, lockx.ErrNotHeld) || r.Acquired {
		t.Fatalf("Pass by a former holder = %+v, %v; want ErrNotHeld", r, err)
	}
	// A fair waiter queued at the backend goes first: the pass releases.
	w := driver.Request{Key: k, Owner: lockx.NewOwner(), Lease: lease, Fair: true, Wait: true}
	if r, err := b.Acquire(ctx, w); err != nil || r.Acquired {
		t.Fatalf("fair waiting Acquire while held = %+v, %v; want a refusal", r, err)
	}
	if r, err := p.Pass(ctx, k, bo, c, lease); err != nil || r.Acquired {
		t.Fatalf("Pass with a fair waiter queued = %+v, %v; want a release (not acquired, no error)", r, err)
	}
	if err := b.Extend(ctx, k, bo, lease); !errors.Is(err, lockx.ErrNotHeld) {
		t.Fatalf("the passer still holds the key after a declined pass: Extend = %v", err)
	}
	if _, err := b.TTL(ctx, k, c); !errors.Is(err, lockx.ErrNotHeld) {
		t.Fatalf("a declined pass granted the key: TTL = %v", err)
	}
	rw, err := b.Acquire(ctx, w)
	if err != nil || !rw.Acquired || rw.Token <= rb.Token {
		t.Fatalf("the queued waiter's Acquire after the declined pass = %+v, %v; want a grant above %d", rw, err, rb.Token)
	}
	if err := b.Release(context.Background(), k, w.Owner); err != nil {
		t.Fatal(err)
	}
}
