package redislock_test

import (
	"testing"
	"time"

	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/lockxtest"
	"github.com/lockx-go/lockx/lockx/redislock"
	"github.com/redis/go-redis/v9"
)

// conformance runs a lockxtest suite against backends over rdb with opts;
// all backends of one run share a prefix, as clients of one deployment do.
func conformance(t *testing.T, suite func(*testing.T, func(*testing.T) driver.Backend), rdb redis.UniversalClient, opts ...redislock.Option) {
	prefix := testPrefix()
	opts = append([]redislock.Option{redislock.WithPrefix(prefix)}, opts...)
	suite(t, func(t *testing.T) driver.Backend { return redislock.New(rdb, opts...) })
}

func TestConformanceSingle(t *testing.T) { conformance(t, lockxtest.Run, single(t)) }

// TestConformanceSingleUnbatched runs the suite with batching off (the
// others run with the default, on).
func TestConformanceSingleUnbatched(t *testing.T) {
	conformance(t, lockxtest.Run, single(t), redislock.WithAutoPipeline(false))
}

func TestConformanceCluster(t *testing.T) { conformance(t, lockxtest.Run, clusterClient(t)) }

func TestConformanceSentinel(t *testing.T) { conformance(t, lockxtest.Run, sentinelClient(t)) }

// The suite again with every grant acknowledged by a replica (WAIT in the
// grant's pipeline), on the topologies that have replicas.

func TestConformanceSentinelReplicaAck(t *testing.T) {
	conformance(t, lockxtest.Run, sentinelClient(t), redislock.WithReplicaAck(1, 2*time.Second))
}

func TestConformanceClusterReplicaAck(t *testing.T) {
	conformance(t, lockxtest.Run, clusterClient(t), redislock.WithReplicaAck(1, 2*time.Second))
}
