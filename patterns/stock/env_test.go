package stock_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/lockx/pglock"
	"github.com/lockx-go/lockx/lockx/redislock"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// env is a shared backend seen through independent clients, as separate
// processes would see it: each client has its own connections, its own
// lockx.Client and its own order-store handle.
type env struct {
	name    string
	clients []*lockx.Client
	orders  []driver.OrderStore
}

type envMaker struct {
	name string
	make func(t testing.TB, n int) env
}

var envs = []envMaker{
	{"memlock", memEnv},
	{"redis", redisEnv},
	{"postgres", pgEnv},
}

// memEnv: one in-process backend (and order store) behind n clients.
func memEnv(t testing.TB, n int) env {
	b := memlock.New()
	orders := memlock.NewOrderStore()
	e := env{name: "memlock"}
	for range n {
		c := lockx.New(b)
		t.Cleanup(func() { _ = c.Close() })
		e.clients = append(e.clients, c)
		e.orders = append(e.orders, orders)
	}
	return e
}

// redisEnv: n Redis connections pools and backends sharing a fresh prefix;
// orders go to PostgreSQL, the production pairing (Redis pre-deducts,
// PostgreSQL keeps the orders under a unique constraint).
func redisEnv(t testing.TB, n int) env {
	addr := testenv.RedisAddr(t)
	prefix := "lockxtest:" + randHex(4) + ":"
	schema, pools := pgPools(t, n, 4)
	e := env{name: "redis"}
	for i := range n {
		rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, PoolSize: 32})
		b := redislock.New(rdb, redislock.WithPrefix(prefix))
		c := lockx.New(b)
		t.Cleanup(func() {
			_ = c.Close()
			_ = rdb.Close()
		})
		e.clients = append(e.clients, c)
		e.orders = append(e.orders, pglock.NewOrderStore(pools[i], pglock.WithSchema(schema)))
	}
	t.Cleanup(func() { cleanRedis(addr, prefix) })
	return e
}

func cleanRedis(addr, prefix string) {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
		if len(keys) == 1000 {
			rdb.Del(ctx, keys...)
			keys = keys[:0]
		}
	}
	if len(keys) > 0 {
		rdb.Del(ctx, keys...)
	}
}

// pgEnv: n pools and backends on one fresh schema: stock, locks and orders
// all in PostgreSQL.
func pgEnv(t testing.TB, n int) env {
	schema, pools := pgPools(t, n, 10)
	e := env{name: "postgres"}
	for i := range n {
		b := pglock.New(pools[i], pglock.WithSchema(schema))
		c := lockx.New(b)
		t.Cleanup(func() { _ = c.Close() })
		e.clients = append(e.clients, c)
		e.orders = append(e.orders, pglock.NewOrderStore(pools[i], pglock.WithSchema(schema)))
	}
	return e
}

// pgPools returns n pools of conns connections on a fresh schema (stock tables migrated), all
// closed and the schema dropped at cleanup.
func pgPools(t testing.TB, n int, conns int32) (string, []*pgxpool.Pool) {
	dsn := testenv.PostgresURL(t)
	schema := "lockx_stock_" + randHex(5)
	var pools []*pgxpool.Pool
	for range n {
		cfg, err := pgxpool.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		cfg.MaxConns = conns
		// Test data need not survive a server crash: skip the WAL flush at
		// commit. Semantics (atomicity, constraints) are unchanged.
		cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		pools = append(pools, pool)
	}
	t.Cleanup(func() {
		for _, p := range pools {
			p.Close()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		defer conn.Close(ctx)
		_, _ = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := pglock.MigrateStock(ctx, pools[0], pglock.WithSchema(schema)); err != nil {
		t.Fatal(err)
	}
	return schema, pools
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
