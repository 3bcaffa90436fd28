package stock_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/pglock"
	"github.com/lockx-go/lockx/lockx/redislock"
	"github.com/lockx-go/lockx/patterns/stock"
)

// The flash-sale rows on Redis: orders/s of one SKU under 64 concurrent
// buyers, for
//
//	GlobalLock     one lock for the SKU, read-modify-write (the anti-pattern)
//	SegmentLocks16 16 segments, each with its own lock, read-modify-write
//	LockFree16     16 segments, one atomic script per deduction
//
// each on loopback and with a simulated 1 ms network round trip (a go-redis
// hook that sleeps before every command or pipeline, as a Redis in another
// zone would cost; the sleep uses no CPU, so it shows what the host's shared
// cores hide on loopback, where the Redis server competes with the buyers
// for the same two cores).
//
// Run: go test -run '^$' -bench 'BenchmarkRedisStock' -benchtime 3s ./patterns/stock/
func BenchmarkRedisStock(b *testing.B) {
	for _, rtt := range []time.Duration{0, time.Millisecond} {
		net := "loopback"
		if rtt > 0 {
			net = "rtt=" + rtt.String()
		}
		for _, bc := range []struct {
			name string
			mode stock.Mode
			segs int
		}{
			{"GlobalLock", stock.Locked, 1},
			{"SegmentLocks16", stock.Locked, 16},
			{"LockFree16", stock.LockFree, 16},
		} {
			b.Run(net+"/"+bc.name, func(b *testing.B) { benchRedisStock(b, bc.mode, bc.segs, rtt) })
		}
	}
}

// latency delays every command and pipeline by rtt.
type latency struct{ rtt time.Duration }

func (latency) DialHook(next redis.DialHook) redis.DialHook { return next }

func (l latency) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		time.Sleep(l.rtt)
		return next(ctx, cmd)
	}
}

func (l latency) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		time.Sleep(l.rtt)
		return next(ctx, cmds)
	}
}

func benchRedisStock(b *testing.B, mode stock.Mode, segs int, rtt time.Duration) {
	// No per-user limit and no order store: the rows compare deductions.
	benchBuy(b, rtt, stock.WithMode(mode), stock.WithSegments(segs), stock.WithLimit(0))
}

// benchBuy measures Buy by 64 concurrent buyers, a new one each time, on a
// fresh SKU of Redis (every command delayed by rtt) configured with opts.
func benchBuy(b *testing.B, rtt time.Duration, opts ...stock.Option) {
	addr := testenv.RedisAddr(b)
	prefix := "lockxbench:" + randHex(4) + ":"
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 64})
	if rtt > 0 {
		rdb.AddHook(latency{rtt})
	}
	c := lockx.New(redislock.New(rdb, redislock.WithPrefix(prefix)))
	b.Cleanup(func() {
		_ = c.Close()
		_ = rdb.Close()
		cleanRedis(addr, prefix)
	})
	ctx := context.Background()
	s := stock.New(c, "bench-"+randHex(4), opts...)
	if _, err := s.Init(ctx, int64(b.N)+1000); err != nil {
		b.Fatal(err)
	}
	var user atomic.Int64
	b.SetParallelism(32) // 64 buyers on 2 cores
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, err := s.Buy(ctx, "u"+strconv.FormatInt(user.Add(1), 10), 1)
			if err != nil && !errors.Is(err, stock.ErrSoldOut) {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "orders/s")
}

// BenchmarkRedisStockOrders measures the supply cap's cost: purchases/s of
// one SKU by 64 concurrent buyers (limit 1, a new buyer each), the ledger in
// Redis and the orders in PostgreSQL, with the cap off and on, alternating
// in the same run (three rounds), with PostgreSQL's default synchronous
// commit and with synchronous_commit = off. The cap's row is one hot row
// per SKU that every order save updates: its lock is held until the commit,
// so the commit's cost is what serialises.
//
// Run: go test -run '^$' -bench 'BenchmarkRedisStockOrders' -benchtime 2s ./patterns/stock/
func BenchmarkRedisStockOrders(b *testing.B) {
	schema, pools := pgPools(b, 1, 32)
	cfg, err := pgxpool.ParseConfig(testenv.PostgresURL(b))
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = 32
	syncPool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(syncPool.Close)
	for _, commit := range []struct {
		name string
		pool *pgxpool.Pool
	}{{"sync", syncPool}, {"async", pools[0]}} {
		orders := pglock.NewOrderStore(commit.pool, pglock.WithSchema(schema))
		for range 3 {
			for _, capped := range []bool{false, true} {
				b.Run(fmt.Sprintf("commit=%s/cap=%v", commit.name, capped), func(b *testing.B) {
					benchRedisOrders(b, orders, capped)
				})
			}
		}
	}
}

func benchRedisOrders(b *testing.B, orders driver.OrderStore, capped bool) {
	opts := []stock.Option{stock.WithSegments(16), stock.WithOrders(orders)}
	if capped {
		opts = append(opts, stock.WithSupplyCap())
	}
	benchBuy(b, 0, opts...)
}
