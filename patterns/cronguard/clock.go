package cronguard

import (
	"time"

	"github.com/lockx-go/lockx/lockx/driver"
)

// defaultResolution is assumed for a backend that does not implement
// driver.Clock: the network backends count leases in milliseconds.
const defaultResolution = time.Millisecond

// resolution is b's clock resolution (driver.Clock), or defaultResolution.
func resolution(b driver.Backend) time.Duration {
	var c driver.Clock
	if driver.As(b, &c) {
		if r := c.Resolution(); r > 0 {
			return r
		}
	}
	return defaultResolution
}
