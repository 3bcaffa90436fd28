package lockx_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/memlock"
)

// TestValidUntil: a held lock is valid until at most its lease after the
// grant began, less the drift; renewal moves the instant on; an ended
// hold reports the zero time.
func TestValidUntil(t *testing.T) {
	c := lockx.New(memlock.New(), lockx.WithDrift(0.01, time.Millisecond))
	defer c.Close()
	ctx := context.Background()
	const lease = 10 * time.Second
	before := time.Now()
	l, err := c.Acquire(ctx, "k", lockx.WithLease(lease))
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	drift := time.Duration(float64(lease)*0.01) + time.Millisecond
	if v := l.ValidUntil(); v.Before(before.Add(lease-drift)) || v.After(after.Add(lease-drift)) {
		t.Errorf("ValidUntil = %v after grant, want within [%v, %v]", v, before.Add(lease-drift), after.Add(lease-drift))
	}
	first := l.ValidUntil()
	time.Sleep(2 * time.Millisecond)
	if err := l.Extend(ctx, lease); err != nil {
		t.Fatal(err)
	}
	if v := l.ValidUntil(); !v.After(first) {
		t.Errorf("ValidUntil after Extend = %v, not after %v", v, first)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if v := l.ValidUntil(); !v.IsZero() {
		t.Errorf("ValidUntil after Release = %v, want the zero time", v)
	}
	var nilLock *lockx.Lock
	if !nilLock.ValidUntil().IsZero() {
		t.Error("nil Lock: ValidUntil not zero")
	}
}
