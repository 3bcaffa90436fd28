package redislock_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/patterns/stock/stocktest"
)

func TestStockSingle(t *testing.T) { stocktest.Run(t, backend(t, single(t))) }

// TestStockCluster runs the suite on a Redis Cluster: every script touches
// one segment's keys, so the segments of one SKU may sit in different slots.
func TestStockCluster(t *testing.T) {
	c := testenv.SharedCluster(t)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs})
	t.Cleanup(func() { _ = rdb.Close() })
	stocktest.Run(t, backend(t, rdb))
}
