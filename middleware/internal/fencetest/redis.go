package fencetest

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/redislock"
)

// Redis is the redislock fence store on the machine's Redis, under a fresh
// prefix whose keys are deleted at cleanup (fence keys never expire).
// redislock issues the scenario's tokens too.
var Redis = Store{Name: "redis", New: func(t *testing.T) (driver.FenceStore, driver.Backend) {
	b := RedisBackend(t)
	return b, b
}, Protects: true}

// RedisBackend returns a redislock.Backend on the machine's Redis under a
// fresh prefix, closed and cleaned up at the end of t.
func RedisBackend(t testing.TB) *redislock.Backend { return RedisBackends(t, 1)[0] }

// RedisBackends returns n redislock.Backends, each with its own client,
// sharing one fresh prefix: n processes of one service. They are closed and
// their keys deleted at the end of t.
func RedisBackends(t testing.TB, n int) []*redislock.Backend {
	addr := testenv.RedisAddr(t)
	prefix := "lockxtest:" + RandomID() + ":"
	bs := make([]*redislock.Backend, n)
	for i := range bs {
		rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 64}) // one per benchmark connection
		b := redislock.New(rdb, redislock.WithPrefix(prefix))
		bs[i] = b
		t.Cleanup(func() {
			_ = b.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			iter := rdb.Scan(ctx, 0, prefix+"*", 100).Iterator()
			for iter.Next(ctx) {
				rdb.Del(ctx, iter.Val())
			}
			_ = rdb.Close()
		})
	}
	return bs
}
