package semaphoretest_test

import (
	"testing"

	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/patterns/semaphore/semaphoretest"
)

// A backend that implements driver.SemaphoreBackend checks its semaphores
// with one call in its own test file; this one checks memlock's.
func Example() {
	conformance := func(t *testing.T) {
		semaphoretest.Run(t, func(t *testing.T) driver.Backend { return memlock.New() })
	}
	_ = conformance // in a _test.go file: func TestConformanceSemaphore(t *testing.T) { … }
}
