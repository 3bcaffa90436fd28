package cronguard_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/redislock"
	"github.com/lockx-go/lockx/patterns/cronguard"
)

// redisClients returns a factory of clients that each have their own Redis
// connection pool and backend, as separate processes would, and share a
// key prefix no other test uses.
func redisClients(t *testing.T) func(t *testing.T) *lockx.Client {
	newBackend := redisBackends(t)
	return func(t *testing.T) *lockx.Client { return clientOf(t, newBackend()) }
}

// redisBackends returns a factory of backends with their own connection
// pools, as separate processes would have, under one key prefix.
func redisBackends(t *testing.T) func() driver.Backend {
	addr := testenv.RedisAddr(t)
	prefix := "cronguardtest:" + jobName(t) + ":"
	return func() driver.Backend {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { _ = rdb.Close() })
		return redislock.New(rdb, redislock.WithPrefix(prefix))
	}
}

func TestRunnerKilledAtMostOnceRedis(t *testing.T) {
	t.Parallel()
	killedAtMostOnce(t, redisBackends(t))
}

// Under AtLeastOnce the instances learn that a trigger is done from records
// kept in Redis itself.
func TestRunnerKilledAtLeastOnceRedis(t *testing.T) {
	t.Parallel()
	newBackend := redisBackends(t)
	var rs driver.ResultStore
	driver.As(newBackend(), &rs)
	store, err := cronguard.NewBackendStore(rs, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	killedAtLeastOnce(t, newBackend, store)
}

func TestFleetRedis(t *testing.T) {
	t.Parallel()
	fleetSuite(t, redisClients(t), true, "scheduled", "now", "backend", "backend5s", "atleastonce")
}
