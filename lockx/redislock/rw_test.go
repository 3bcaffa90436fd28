package redislock_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/redislock"
	"github.com/lockx-go/lockx/patterns/rwlock/rwlocktest"
)

// rwConformance runs rwlocktest.Run against backends over rdb sharing one
// prefix, as clients of one deployment do.
func rwConformance(t *testing.T, rdb redis.UniversalClient) {
	t.Cleanup(func() { _ = rdb.Close() })
	prefix := testPrefix()
	rwlocktest.Run(t, func(t *testing.T) driver.Backend {
		return redislock.New(rdb, redislock.WithPrefix(prefix))
	})
}

func TestRWConformanceSingle(t *testing.T) {
	rwConformance(t, redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t)}))
}

// On a Cluster every script touches only keys of one hash slot: a CROSSSLOT
// error would fail the suite.
func TestRWConformanceCluster(t *testing.T) {
	c := testenv.SharedCluster(t)
	rwConformance(t, redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs}))
}

func TestRWConformanceSentinel(t *testing.T) {
	s := testenv.SharedSentinel(t)
	rwConformance(t, redis.NewFailoverClient(&redis.FailoverOptions{MasterName: s.MasterName, SentinelAddrs: s.SentinelAddrs}))
}
