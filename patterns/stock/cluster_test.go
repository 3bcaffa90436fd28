package stock_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/lockx/redislock"
	"github.com/lockx-go/lockx/patterns/stock"
)

// TestFlashSaleCluster runs the flash sale on a Redis Cluster, where the 16
// segments of the SKU hash to different slots (and nodes): every script
// touches one segment, the level reads are pipelined per node.
func TestFlashSaleCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("load test")
	}
	t.Parallel()
	cl := testenv.SharedCluster(t)
	prefix := "lockxtest:" + randHex(4) + ":"
	orders := memlock.NewOrderStore()
	e := env{name: "cluster"}
	for range loadClients {
		rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs})
		c := lockx.New(redislock.New(rdb, redislock.WithPrefix(prefix)))
		t.Cleanup(func() {
			_ = c.Close()
			_ = rdb.Close()
		})
		e.clients = append(e.clients, c)
		e.orders = append(e.orders, orders)
	}
	t.Cleanup(func() {
		rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs})
		defer rdb.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = rdb.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			iter := c.Scan(ctx, 0, prefix+"*", 500).Iterator()
			for iter.Next(ctx) {
				c.Del(ctx, iter.Val())
			}
			return iter.Err()
		})
	})
	// The segments' hash tags "<sku>/<seg>" spread over the slots.
	probe := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs})
	defer probe.Close()
	slots := map[int64]bool{}
	for seg := range 16 {
		n, err := probe.ClusterKeySlot(context.Background(), "{sku/"+strconv.Itoa(seg)+"}").Result()
		if err != nil {
			t.Fatal(err)
		}
		slots[n] = true
	}
	if len(slots) < 8 {
		t.Fatalf("16 segments in %d slots", len(slots))
	}
	for _, mode := range []stock.Mode{stock.LockFree, stock.Locked} {
		t.Run(mode.String(), func(t *testing.T) { flashSale(t, e, mode) })
	}
}
