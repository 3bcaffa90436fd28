package redislock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx/redislock"
	"github.com/lockx-go/lockx/patterns/stock/stocktest"
)

func TestStockSingle(t *testing.T) {
	rdb := single(t)
	stocktest.Run(t, stockBackend(t, rdb))
}

// TestStockCluster runs the suite on a Redis Cluster: every script touches
// one segment's keys, so the segments of one SKU may sit in different slots.
func TestStockCluster(t *testing.T) {
	c := testenv.SharedCluster(t)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs})
	t.Cleanup(func() { _ = rdb.Close() })
	stocktest.Run(t, stockBackend(t, rdb))
}

// stockBackend returns a backend with a fresh prefix whose keys (stock
// keys never expire) are deleted at cleanup, on every master.
func stockBackend(t *testing.T, rdb redis.UniversalClient) *redislock.Backend {
	prefix := testPrefix()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		del := func(ctx context.Context, c *redis.Client) error {
			iter := c.Scan(ctx, 0, prefix+"*", 500).Iterator()
			for iter.Next(ctx) {
				c.Del(ctx, iter.Val())
			}
			return iter.Err()
		}
		if cc, ok := rdb.(*redis.ClusterClient); ok {
			_ = cc.ForEachMaster(ctx, del)
		} else if c, ok := rdb.(*redis.Client); ok {
			_ = del(ctx, c)
		}
	})
	return backend(t, rdb, redislock.WithPrefix(prefix))
}
