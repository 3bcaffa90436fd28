package idemtest

import (
	"testing"
	"time"
)

// Verdict is what one call with an idempotency key came to.
type Verdict int

// Verdicts of a call in a crash test.
const (
	InProgress Verdict = iota // refused: another call holds the key
	Ran                       // the work ran in this call
	Replayed                  // an outcome was replayed
)

func (v Verdict) String() string {
	return [...]string{"in progress", "ran", "replayed"}[v]
}

// Crash is a crash test of one key: a holder — another process, which has
// started the work under the key and is blocked in it — is killed.
type Crash struct {
	// Lease is the holder's lock lease: the watchdog renews it while the
	// holder lives, and it runs out at most Lease after the holder died.
	Lease time.Duration
	// Hold is how long calls are made while the holder lives; make it a few
	// leases, so that only renewals can keep the key held.
	Hold time.Duration
	// Retention is how long outcomes are kept: the key must be free long
	// before it.
	Retention time.Duration
	// Call makes one call with the key, whose work increments Work.
	Call func(t testing.TB) Verdict
	// Work counts the runs of the work, the holder's included.
	Work func(t testing.TB) int64
	// Kill SIGKILLs the holder and returns once it is dead.
	Kill func(t testing.TB)
}

// Run checks that while the holder lives every call is in progress and the
// work ran once (the holder's run), and that after the kill a call runs the
// work again within the lease (plus a second of slack for a loaded
// machine), not after the retention.
func (c Crash) Run(t testing.TB) {
	t.Helper()
	if n := c.Work(t); n != 1 {
		t.Fatalf("work ran %d times before any call, want 1 (the holder's)", n)
	}
	for end := time.Now().Add(c.Hold); time.Now().Before(end); time.Sleep(c.Lease / 10) {
		if v := c.Call(t); v != InProgress {
			t.Fatalf("a call while the holder lives: %v, want in progress", v)
		}
	}
	if n := c.Work(t); n != 1 {
		t.Fatalf("work ran %d times while the holder lived, want 1", n)
	}
	c.Kill(t)
	killed := time.Now()
	limit := c.Lease + time.Second
	if limit >= c.Retention {
		t.Fatalf("test set-up: lease %v + 1 s is not shorter than the retention %v", c.Lease, c.Retention)
	}
	for {
		v := c.Call(t)
		if v == Ran {
			break
		}
		if v == Replayed {
			t.Fatal("after the holder died: an outcome was replayed, but the holder stored none")
		}
		if time.Since(killed) > limit {
			t.Fatalf("key still in progress %v after the holder was killed; the lease is %v", time.Since(killed), c.Lease)
		}
		time.Sleep(c.Lease / 20)
	}
	t.Logf("key free %v after the holder was killed (lease %v, retention %v)", time.Since(killed).Round(time.Millisecond), c.Lease, c.Retention)
	if n := c.Work(t); n != 2 {
		t.Fatalf("work ran %d times, want 2 (the killed holder's and the retry's)", n)
	}
	if v := c.Call(t); v != Replayed {
		t.Fatalf("a call after the retry stored its outcome: %v, want replayed", v)
	}
}
