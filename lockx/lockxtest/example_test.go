package lockxtest_test

import (
	"testing"

	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/lockxtest"
	"github.com/lockx-go/lockx/lockx/memlock"
)

// A backend's own test file runs the whole suite with one call; this one
// runs it on memlock. newBackend is called once per subtest, and the
// backends it returns may share one store.
func Example() {
	conformance := func(t *testing.T) {
		newBackend := func(t *testing.T) driver.Backend { return memlock.New() }
		lockxtest.Run(t, newBackend)
		lockxtest.RunMany(t, newBackend) // for a driver.ManyAcquirer
	}
	_ = conformance // in a _test.go file: func TestConformance(t *testing.T) { … }
}
