package middleware_test

import (
	"testing"

	"github.com/lockx-go/lockx/middleware/internal/fencetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// stores lists the fence stores every end-to-end test runs against.
func stores(t *testing.T) []fencetest.Store { return fencetest.Stores() }
