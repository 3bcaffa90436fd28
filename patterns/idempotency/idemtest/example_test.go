package idemtest_test

import (
	"testing"

	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/patterns/idempotency/idemtest"
)

// A driver.ResultStore checks how it keeps idempotent results with one call
// in its own test file; this one checks memlock's.
func Example() {
	conformance := func(t *testing.T) {
		b := memlock.New()
		idemtest.RunStore(t, func(*testing.T) driver.ResultStore { return b })
	}
	_ = conformance // in a _test.go file: func TestResultStore(t *testing.T) { … }
}
