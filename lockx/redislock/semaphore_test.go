package redislock_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/redislock"
	"github.com/lockx-go/lockx/patterns/semaphore/semaphoretest"
)

func semConformance(t *testing.T, rdb redis.UniversalClient) {
	t.Cleanup(func() { _ = rdb.Close() })
	prefix := testPrefix()
	semaphoretest.Run(t, func(t *testing.T) driver.Backend {
		return redislock.New(rdb, redislock.WithPrefix(prefix))
	})
}

func TestSemaphoreConformanceSingle(t *testing.T) {
	semConformance(t, redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t)}))
}

func TestSemaphoreConformanceCluster(t *testing.T) {
	c := testenv.SharedCluster(t)
	semConformance(t, redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs}))
}

func TestSemaphoreConformanceSentinel(t *testing.T) {
	s := testenv.SharedSentinel(t)
	semConformance(t, redis.NewFailoverClient(&redis.FailoverOptions{MasterName: s.MasterName, SentinelAddrs: s.SentinelAddrs}))
}
