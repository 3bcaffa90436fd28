package memlock_test

import (
	"testing"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/lockxtest"
	"github.com/lockx-go/lockx/lockx/memlock"
)

func TestConformanceMany(t *testing.T) {
	b := memlock.New() // one store shared by every client, like one server
	lockxtest.RunMany(t, func(*testing.T) lockx.Backend { return b })
}
