package cronguard_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/redislock"
)

// redisClients returns a factory of clients that each have their own Redis
// connection pool and backend, as separate processes would, and share a
// key prefix no other test uses.
func redisClients(t *testing.T) func(t *testing.T) *lockx.Client {
	addr := testenv.RedisAddr(t)
	prefix := "cronguardtest:" + jobName(t) + ":"
	return func(t *testing.T) *lockx.Client {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		c := lockx.New(redislock.New(rdb, redislock.WithPrefix(prefix)))
		t.Cleanup(func() {
			_ = c.Close()
			_ = rdb.Close()
		})
		return c
	}
}

func TestFleetRedis(t *testing.T) {
	t.Parallel()
	fleetSuite(t, redisClients(t), 80, "scheduled", "backend")
}
