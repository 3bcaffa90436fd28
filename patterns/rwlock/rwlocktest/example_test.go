package rwlocktest_test

import (
	"testing"

	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/patterns/rwlock/rwlocktest"
)

// A backend that implements driver.RWBackend checks its read/write locks
// with one call in its own test file; this one checks memlock's.
func Example() {
	conformance := func(t *testing.T) {
		rwlocktest.Run(t, func(t *testing.T) driver.Backend { return memlock.New() })
	}
	_ = conformance // in a _test.go file: func TestConformanceRW(t *testing.T) { … }
}
