package bench

import (
	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/redislock"
)

// newRedisBackend returns lockx's Redis backend over rdb.
func newRedisBackend(rdb redis.UniversalClient, opts ...redislock.Option) (lockx.Backend, error) {
	return redislock.New(rdb, opts...), nil
}
