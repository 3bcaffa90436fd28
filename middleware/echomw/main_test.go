package echomw_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/lockx-go/lockx/middleware/internal/fencetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// stores lists the fence stores the Kleppmann scenario runs against.
func stores(t *testing.T) []fencetest.Store { return fencetest.Stores() }
