package lockx_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
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

// TestValidityTimerManyHolds: the Client's one validity timer declares
// each hold lost once its own validity has passed — never before, and
// promptly after — whatever the order the holds were taken, released or
// extended in; released holds and holds extended past the test are never
// declared lost.
func TestValidityTimerManyHolds(t *testing.T) {
	c := lockx.New(memlock.New())
	defer c.Close()
	ctx := context.Background()
	const n = 30
	order := rand.Perm(n)
	locks := make([]*lockx.Lock, n)
	for _, i := range order {
		l, err := c.Acquire(ctx, fmt.Sprintf("k%d", i), lockx.WithLease(80*time.Millisecond+time.Duration(i)*20*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		locks[i] = l
	}
	valid := make([]time.Time, n)
	for _, i := range order {
		switch i % 5 {
		case 0:
			if err := locks[i].Release(ctx); err != nil {
				t.Fatal(err)
			}
		case 1:
			if err := locks[i].Extend(ctx, time.Minute); err != nil {
				t.Fatal(err)
			}
		case 2: // shortened: must fire before the timer's earlier schedule
			if err := locks[i].Extend(ctx, 50*time.Millisecond); err != nil {
				t.Fatal(err)
			}
		}
		valid[i] = locks[i].ValidUntil()
	}
	// In the order their validity ends, so that each loss is seen as it
	// happens.
	byEnd := make([]int, 0, n)
	for i := range n {
		if i%5 > 1 {
			byEnd = append(byEnd, i)
		}
	}
	slices.SortFunc(byEnd, func(a, b int) int { return valid[a].Compare(valid[b]) })
	for _, i := range byEnd {
		select {
		case <-locks[i].Lost():
			if now := time.Now(); now.Before(valid[i]) {
				t.Errorf("k%d: lost %v before its validity ended", i, valid[i].Sub(now))
			}
		case <-time.After(time.Until(valid[i]) + 2*time.Second):
			t.Fatalf("k%d: not lost 2s after its validity ended", i)
		}
	}
	for i, l := range locks {
		if i%5 != 0 && i%5 != 1 {
			continue
		}
		select {
		case <-l.Lost():
			t.Errorf("k%d: lost although released or extended", i)
		default:
		}
		if i%5 == 1 {
			if err := l.Release(ctx); err != nil {
				t.Errorf("k%d: %v", i, err)
			}
		}
	}
}
