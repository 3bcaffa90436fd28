package memlock_test

import (
	"testing"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/patterns/idempotency/idemtest"
)

func TestResultStore(t *testing.T) {
	s := memlock.NewResultStore()
	idemtest.RunStore(t, func(*testing.T) lockx.ResultStore { return s })
}

func TestBackendResultStore(t *testing.T) {
	b := memlock.New()
	idemtest.RunStore(t, func(*testing.T) lockx.ResultStore { return b })
}
