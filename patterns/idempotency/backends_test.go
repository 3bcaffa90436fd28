package idempotency_test

import (
	"crypto/rand"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/redislock"
	"github.com/lockx-go/lockx/patterns/idempotency"
)

// redisGuards returns n guards over n clients of n backends sharing the
// machine's Redis under one fresh prefix: n service instances.
func redisGuards(t *testing.T, n int, opts ...idempotency.Option) []*idempotency.Guard {
	rdb := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t)})
	t.Cleanup(func() { rdb.Close() })
	prefix := redislock.WithPrefix("lockxtest:idem:" + rand.Text() + ":")
	gs := make([]*idempotency.Guard, n)
	for i := range gs {
		locks := lockx.New(redislock.New(rdb, prefix))
		t.Cleanup(func() { locks.Close() })
		g, err := idempotency.New(locks, opts...)
		if err != nil {
			t.Fatal(err)
		}
		gs[i] = g
	}
	return gs
}

func TestConcurrentOnceRedis(t *testing.T) { testConcurrentOnce(t, redisGuards) }
