package memlock_test

import (
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/lockxtest"
	"github.com/lockx-go/lockx/lockx/memlock"
	"testing"
)

func TestSemaphoreConformance(t *testing.T) {
	b := memlock.New()
	lockxtest.RunSemaphore(t, func(*testing.T) driver.Backend { return b })
}
