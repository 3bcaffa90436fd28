package fencetest

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/redislock"
)

// Redis is the redislock fence store on the machine's Redis, under a fresh
// prefix whose keys are deleted at cleanup (fence keys never expire).
// redislock issues the scenario's tokens too.
var Redis = Store{Name: "redis", New: func(t *testing.T) (lockx.FenceStore, lockx.Backend) {
	b := RedisBackend(t)
	return b, b
}, Protects: true}

// RedisBackend returns a redislock.Backend on the machine's Redis under a
// fresh prefix, closed and cleaned up at the end of t.
func RedisBackend(t testing.TB) *redislock.Backend {
	rdb := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t), PoolSize: 64}) // one per benchmark connection
	prefix := "lockxtest:" + RandomID() + ":"
	b := redislock.New(rdb, redislock.WithPrefix(prefix))
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
	return b
}
