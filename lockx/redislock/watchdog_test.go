//go:build unix

package redislock_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/redislock"
)

// TestWatchdogStallStaysOnItsNode: on a Cluster, with one master stopped
// (SIGSTOP: connections open, no replies), the watchdog keeps renewing the
// locks on the other masters although their lease is shorter than the
// client's read timeout, which the stopped node's renewal waits for. Only
// the stopped node's lock is lost.
func TestWatchdogStallStaysOnItsNode(t *testing.T) {
	c := testenv.StartCluster(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	// The default read timeout (3 s): longer than the lease.
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs})
	defer func() { _ = rdb.Close() }()
	prefix := testPrefix()
	b := redislock.New(rdb, redislock.WithPrefix(prefix))
	defer func() { _ = b.Close() }()
	const lease = 1500 * time.Millisecond
	lc := lockx.New(b, lockx.WithWatchdog(lease))
	defer func() { _ = lc.Close() }()
	ctx := ctxT(t, 30*time.Second)

	stalledKey := keysOn(t, rdb, prefix, c.Masters[0].Addr, true, 1)[0]
	healthyKeys := keysOn(t, rdb, prefix, c.Masters[0].Addr, false, 4)
	stalled, err := lc.Acquire(ctx, stalledKey)
	if err != nil {
		t.Fatal(err)
	}
	var healthy []*lockx.Lock
	for _, k := range healthyKeys {
		l, err := lc.Acquire(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		healthy = append(healthy, l)
	}

	// Stopped until the lock on it is lost and a lease more (about two
	// leases, several renewal periods of the others), well short of the
	// cluster's node timeout (5 s), so nothing fails over.
	pid := c.Masters[0].Pid
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	defer resume()
	select {
	case <-stalled.Lost():
	case <-time.After(3 * lease):
		t.Error("the lock on the stopped node was not reported lost")
	}
	time.Sleep(lease)
	resume()

	for i, l := range healthy {
		select {
		case <-l.Lost():
			t.Errorf("lock %q on a healthy node was lost while another node was stopped", healthyKeys[i])
			continue
		default:
		}
		if ttl, err := l.TTL(ctx); err != nil || ttl <= 0 {
			t.Errorf("lock %q on a healthy node: TTL = %v, %v; want it held", healthyKeys[i], ttl, err)
		}
		if err := l.Release(ctx); err != nil {
			t.Errorf("release %q: %v", healthyKeys[i], err)
		}
	}
	_ = stalled.Release(ctx) // lost: its error is expected
}
