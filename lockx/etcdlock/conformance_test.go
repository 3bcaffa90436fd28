package etcdlock_test

import (
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/etcdlock"
	"github.com/lockx-go/lockx/lockx/lockxtest"
	"github.com/lockx-go/lockx/patterns/rwlock/rwlocktest"
	"github.com/lockx-go/lockx/patterns/semaphore/semaphoretest"
	"testing"
)

// conformance runs one lockxtest suite on the shared single-node cluster:
// every Backend of the run shares one prefix and one client.
func conformance(t *testing.T, run func(*testing.T, func(*testing.T) driver.Backend)) {
	t.Parallel()
	cli := client(t, single)
	prefix := etcdlock.WithPrefix(testPrefix())
	run(t, func(t *testing.T) driver.Backend { return etcdlock.New(cli, prefix) })
}

func TestConformance(t *testing.T)          { conformance(t, lockxtest.Run) }
func TestConformanceRW(t *testing.T)        { conformance(t, rwlocktest.Run) }
func TestConformanceSemaphore(t *testing.T) { conformance(t, semaphoretest.Run) }
func TestConformanceMany(t *testing.T)      { conformance(t, lockxtest.RunMany) }
