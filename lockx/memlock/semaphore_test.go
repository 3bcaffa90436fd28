package memlock_test

import (
	"testing"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/lockxtest"
	"github.com/lockx-go/lockx/lockx/memlock"
)

func TestSemaphoreConformance(t *testing.T) {
	b := memlock.New()
	lockxtest.RunSemaphore(t, func(*testing.T) lockx.Backend { return b })
}
