// Package backendtest opens lockx backends for tests that drive several
// clients against one shared lock state on every backend (the pattern
// packages' property tests).
package backendtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/lockx/pglock"
	"github.com/lockx-go/lockx/lockx/redislock"
)

// Names lists the backends Shared opens, in test order.
var Names = []string{"memlock", "redis", "postgres"}

// Shared returns a factory of backends on one shared state of the named
// backend: every call gives a new backend, as a separate process would have
// (a lockx.Client's Close closes its backend), over the same in-process
// table (memlock), Redis key prefix or PostgreSQL database. The servers are
// those of testenv; what Shared opens is closed when t ends.
func Shared(t testing.TB, name string) func() driver.Backend {
	t.Helper()
	switch name {
	case "memlock":
		b := memlock.New()
		return func() driver.Backend { return b }
	case "redis":
		rdb := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t)})
		t.Cleanup(func() { rdb.Close() })
		prefix := "lockxtest:" + string(lockx.NewOwner())[:8] + ":"
		return func() driver.Backend { return redislock.New(rdb, redislock.WithPrefix(prefix)) }
	case "postgres":
		pool, err := pgxpool.New(context.Background(), testenv.PostgresURL(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		return func() driver.Backend { return pglock.New(pool) }
	}
	t.Fatalf("backendtest: unknown backend %q", name)
	return nil
}
