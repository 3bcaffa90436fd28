package memlock_test

import (
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/patterns/idempotency/idemtest"
	"testing"
)

func TestResultStore(t *testing.T) {
	s := memlock.NewResultStore()
	idemtest.RunStore(t, func(*testing.T) driver.ResultStore { return s })
}

func TestBackendResultStore(t *testing.T) {
	b := memlock.New()
	idemtest.RunStore(t, func(*testing.T) driver.ResultStore { return b })
}
