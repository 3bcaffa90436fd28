package memlock_test

import (
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/patterns/rwlock/rwlocktest"
	"testing"
)

func TestRWConformance(t *testing.T) {
	b := memlock.New()
	rwlocktest.Run(t, func(*testing.T) driver.Backend { return b })
}
