package redislock_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/lockx/lockxtest"
	"github.com/lockx-go/lockx/lockx/redislock"
)

// manyConformance runs the multi-key suite (Client.AcquireMany, through the
// backend's ManyAcquirer) over rdb with batching on and off.
func manyConformance(t *testing.T, rdb redis.UniversalClient) {
	t.Run("Batched", func(t *testing.T) { conformance(t, lockxtest.RunMany, rdb) })
	t.Run("Unbatched", func(t *testing.T) { conformance(t, lockxtest.RunMany, rdb, redislock.WithAutoPipeline(false)) })
}

func TestConformanceManySingle(t *testing.T) { manyConformance(t, single(t)) }

func TestConformanceManyCluster(t *testing.T) { manyConformance(t, clusterClient(t)) }

func TestConformanceManySentinel(t *testing.T) { manyConformance(t, sentinelClient(t)) }

// With WithReplicaAck the backend declines the one-call attempt and the
// Client takes the keys one by one, each acknowledged.
func TestConformanceManySentinelReplicaAck(t *testing.T) {
	conformance(t, lockxtest.RunMany, sentinelClient(t), redislock.WithReplicaAck(1, 2*time.Second))
}
