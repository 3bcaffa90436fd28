package httplock_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/internal/lockxd"
	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/httplock"
	"github.com/lockx-go/lockx/lockx/lockxtest"
	"github.com/lockx-go/lockx/lockx/pglock"
	"github.com/lockx-go/lockx/lockx/redislock"
	"github.com/lockx-go/lockx/patterns/rwlock/rwlocktest"
	"github.com/lockx-go/lockx/patterns/semaphore/semaphoretest"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// tenants of the test servers: a and b unlimited, q with small quotas.
func tenants() []lockxd.TenantConfig {
	return []lockxd.TenantConfig{
		{Tenant: "a", SHA256: lockxd.HashKey("key-a")},
		{Tenant: "b", SHA256: lockxd.HashKey("key-b")},
		{Tenant: "q", SHA256: lockxd.HashKey("key-q"), MaxHeld: 2, MaxWaiters: 1},
		{Tenant: "r", SHA256: lockxd.HashKey("key-r"), Rate: 2, Burst: 4},
	}
}

// serve starts lockxd over b on a loopback port and returns its URL.
func serve(t testing.TB, b driver.Backend) string {
	srv := lockxd.NewServer(b, lockxd.Config{Tenants: tenants(), MaxWait: 20 * time.Second})
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	t.Cleanup(srv.Shutdown) // runs first: ends watch streams
	return ts.URL
}

// client returns an httplock backend for the tenant of apiKey.
func client(t testing.TB, url, apiKey string) *httplock.Backend {
	b := httplock.New(url, apiKey)
	t.Cleanup(func() { _ = b.Close() })
	return b
}

type backendCase struct {
	name string
	new  func(t testing.TB) driver.Backend
}

func redisBackend(t testing.TB) driver.Backend {
	rdb := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t)})
	b := redislock.New(rdb, redislock.WithPrefix(fmt.Sprintf("httplock-test:%d:", time.Now().UnixNano())))
	t.Cleanup(func() { _ = b.Close(); _ = rdb.Close() })
	return b
}

func pgBackend(t testing.TB) driver.Backend {
	pool, err := pgxpool.New(context.Background(), testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	b := pglock.New(pool, pglock.WithNamespace(fmt.Sprintf("httplock-test-%d", time.Now().UnixNano())))
	t.Cleanup(func() { _ = b.Close(); pool.Close() })
	return b
}

func backends() []backendCase {
	return []backendCase{
		{"redis", redisBackend},
		{"postgres", pgBackend},
	}
}

// The whole conformance suite — locks, multi-key sets, read/write locks,
// semaphores — through lockxd, with Redis and with PostgreSQL behind it.
func TestConformance(t *testing.T) {
	for _, bc := range backends() {
		t.Run(bc.name, func(t *testing.T) {
			t.Parallel()
			url := serve(t, bc.new(t))
			newBackend := func(t *testing.T) driver.Backend { return client(t, url, "key-a") }
			t.Run("Locks", func(t *testing.T) { lockxtest.Run(t, newBackend) })
			t.Run("Many", func(t *testing.T) { lockxtest.RunMany(t, newBackend) })
			t.Run("RW", func(t *testing.T) { rwlocktest.Run(t, newBackend) })
			t.Run("Semaphore", func(t *testing.T) { semaphoretest.Run(t, newBackend) })
		})
	}
}

func redislockNew(rdb redis.UniversalClient, prefix string) driver.Backend {
	return redislock.New(rdb, redislock.WithPrefix(prefix))
}

func pglockNew(pool *pgxpool.Pool, namespace string) driver.Backend {
	return pglock.New(pool, pglock.WithNamespace(namespace))
}
