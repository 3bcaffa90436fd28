package memlock_test

import (
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/lockxtest"
	"github.com/lockx-go/lockx/lockx/memlock"
	"go.uber.org/goleak"
	"testing"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	b := memlock.New() // one store shared by every client, like one server
	lockxtest.Run(t, func(*testing.T) driver.Backend { return b })
}
