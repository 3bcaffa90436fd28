package middleware_test

import (
	"testing"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/middleware/internal/fencetest"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// stores lists the fence stores every end-to-end test runs against.
func stores(t *testing.T) []fencetest.Store {
	return fencetest.Stores(fencetest.Redis, fencetest.Postgres)
}
