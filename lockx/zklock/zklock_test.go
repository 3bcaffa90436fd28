package zklock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/lockxtest"
	"github.com/lockx-go/lockx/lockx/zklock"
	"github.com/lockx-go/lockx/patterns/rwlock/rwlocktest"
	"github.com/lockx-go/lockx/patterns/semaphore/semaphoretest"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// dial returns a Backend on addr (host:port, or a comma-separated
// ensemble), closed at cleanup.
func dial(t testing.TB, addr string, opts ...zklock.Option) *zklock.Backend {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := zklock.Dial(ctx, strings.Split(addr, ","), opts...)
	if err != nil {
		t.Fatalf("Dial(%s): %v", addr, err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func TestConformance(t *testing.T) {
	z := testenv.SharedZooKeeper(t)
	lockxtest.Run(t, func(t *testing.T) driver.Backend { return dial(t, z.Addr) })
}

func TestRWConformance(t *testing.T) {
	z := testenv.SharedZooKeeper(t)
	rwlocktest.Run(t, func(t *testing.T) driver.Backend { return dial(t, z.Addr) })
}

func TestSemaphoreConformance(t *testing.T) {
	z := testenv.SharedZooKeeper(t)
	semaphoretest.Run(t, func(t *testing.T) driver.Backend { return dial(t, z.Addr) })
}
