package bench

import (
	"context"

	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/redislock"
	"github.com/redis/go-redis/v9"
)

// openRedisBackend opens a go-redis client of its own on the main server
// and lockx's Redis backend over it; the caller closes both.
func openRedisBackend(ctx context.Context, e *Env, poolSize int, opts ...redislock.Option) (driver.Backend, *redis.Client, error) {
	rdb, err := e.Client(ctx, poolSize)
	if err != nil {
		return nil, nil, err
	}
	return redislock.New(rdb, opts...), rdb, nil
}
