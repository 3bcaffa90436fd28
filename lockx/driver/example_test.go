package driver_test

import (
	"fmt"

	"github.com/lockx-go/lockx/lockx/breaker"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/memlock"
)

// As finds a capability on a backend or through the wrappers around it: the
// breaker answers with a gated read/write lock of its own, so every call
// still passes through the breaker.
func ExampleAs() {
	wrapped := breaker.Wrap(memlock.New())

	var rw driver.RWBackend
	fmt.Println("read/write locks:", driver.As(wrapped, &rw))

	var many driver.ManyAcquirer
	fmt.Println("many keys in one call:", driver.As(wrapped, &many))
	// Output:
	// read/write locks: true
	// many keys in one call: true
}
