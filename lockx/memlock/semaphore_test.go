package memlock_test

import (
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/patterns/semaphore/semaphoretest"
	"testing"
)

func TestSemaphoreConformance(t *testing.T) {
	b := memlock.New()
	semaphoretest.Run(t, func(*testing.T) driver.Backend { return b })
}
