package leader_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/patterns/leader/leadertest"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		childMain()
	}
	goleak.VerifyTestMain(m)
}

func TestMemlock(t *testing.T) {
	b := memlock.New()
	leadertest.Run(t, func(t *testing.T) *lockx.Client {
		c := lockx.New(b)
		t.Cleanup(func() { c.Close() })
		return c
	})
}
