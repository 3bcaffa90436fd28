package redislock_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/lockxtest"
	"github.com/lockx-go/lockx/lockx/redislock"
)

// conformance runs lockxtest against backends over rdb; all backends of one
// run share a prefix, as clients of one deployment do.
func conformance(t *testing.T, rdb redis.UniversalClient) {
	t.Cleanup(func() { _ = rdb.Close() })
	prefix := testPrefix()
	lockxtest.Run(t, func(t *testing.T) lockx.Backend {
		return redislock.New(rdb, redislock.WithPrefix(prefix))
	})
}

func TestConformanceSingle(t *testing.T) {
	conformance(t, redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t)}))
}

func TestConformanceCluster(t *testing.T) {
	c := testenv.SharedCluster(t)
	conformance(t, redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs}))
}

func TestConformanceSentinel(t *testing.T) {
	s := testenv.SharedSentinel(t)
	conformance(t, redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:    s.MasterName,
		SentinelAddrs: s.SentinelAddrs,
	}))
}

// The suite again with every grant acknowledged by a replica (WAIT in the
// grant's pipeline), on the topologies that have replicas.

func TestConformanceSentinelReplicaAck(t *testing.T) {
	s := testenv.SharedSentinel(t)
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: s.MasterName, SentinelAddrs: s.SentinelAddrs})
	t.Cleanup(func() { _ = rdb.Close() })
	prefix := testPrefix()
	lockxtest.Run(t, func(t *testing.T) lockx.Backend {
		return redislock.New(rdb, redislock.WithPrefix(prefix), redislock.WithReplicaAck(1, 2*time.Second))
	})
}

func TestConformanceClusterReplicaAck(t *testing.T) {
	c := testenv.SharedCluster(t)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs})
	t.Cleanup(func() { _ = rdb.Close() })
	prefix := testPrefix()
	lockxtest.Run(t, func(t *testing.T) lockx.Backend {
		return redislock.New(rdb, redislock.WithPrefix(prefix), redislock.WithReplicaAck(1, 2*time.Second))
	})
}
