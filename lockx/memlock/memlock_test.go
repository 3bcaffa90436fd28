package memlock_test

import (
	"testing"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/lockxtest"
	"github.com/lockx-go/lockx/lockx/memlock"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	b := memlock.New() // one store shared by every client, like one server
	lockxtest.Run(t, func(*testing.T) lockx.Backend { return b })
}
