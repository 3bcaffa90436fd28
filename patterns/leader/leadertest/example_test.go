package leadertest_test

import (
	"testing"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/patterns/leader/leadertest"
)

// A backend checks leader election over its locks with one call in its own
// test file; this one checks memlock. Each client stands for one process:
// give each its own Client over a backend that shares the store.
func Example() {
	conformance := func(t *testing.T) {
		b := memlock.New()
		leadertest.Run(t, func(t *testing.T) *lockx.Client {
			c := lockx.New(b)
			t.Cleanup(func() { _ = c.Close() })
			return c
		})
	}
	_ = conformance // in a _test.go file: func TestLeader(t *testing.T) { … }
}
