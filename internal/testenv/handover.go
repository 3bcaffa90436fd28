package testenv

import (
	"testing"
	"time"
)

// HandOver checks a wake-up: it starts acquire (which takes the lock,
// waiting for it, and gives it back) in a goroutine, lets pause pass so
// that the waiter has tried and waits, calls release on the holder's lock
// and returns how long after the release acquire returned. It fails the
// test if release or acquire fails, or if acquire has not returned within
// five seconds of the release — set the waiter's backoff above that, so
// that only a wake-up can pass.
func HandOver(tb testing.TB, pause time.Duration, release, acquire func() error) time.Duration {
	tb.Helper()
	got := make(chan error, 1)
	go func() { got <- acquire() }()
	time.Sleep(pause)
	released := time.Now()
	if err := release(); err != nil {
		tb.Fatalf("holder's release: %v", err)
	}
	select {
	case err := <-got:
		if err != nil {
			tb.Fatalf("waiter: %v", err)
		}
		return time.Since(released)
	case <-time.After(5 * time.Second):
		tb.Fatal("waiter not handed the lock within 5 s of the release")
		return 0
	}
}
