package redislock_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/redislock"
)

// The uncontended benchmarks compare a lockx acquire + release pair with the
// raw baseline on the same client: SET NX PX plus a Lua compare-and-delete.
// Each goroutine locks its own key; leases are explicit (no watchdog).
// Run: go test -run '^$' -bench 'Uncontended|Raw' -benchmem ./lockx/redislock
// "g64" runs 64 goroutines (SetParallelism on GOMAXPROCS=2), "g1" one.

// benchRedis is a client with a pool as large as the goroutine count, as in
// the peer measurements of docs/benchmarks.md.
func benchRedis(b *testing.B) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(b), PoolSize: 64})
	b.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// runPairs runs pair on its own key per goroutine with g goroutines (g is
// rounded to a multiple of GOMAXPROCS) and reports pairs/s.
func runPairs(b *testing.B, g int, pair func(ctx context.Context, key string) error) {
	ctx := context.Background()
	var ids atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	if g == 1 {
		key := "bench:" + randHex(4)
		for b.Loop() {
			if err := pair(ctx, key); err != nil {
				b.Fatal(err)
			}
		}
	} else {
		b.SetParallelism(max(1, g/maxprocs()))
		b.RunParallel(func(pb *testing.PB) {
			key := "bench:" + randHex(4) + ":" + strconv.FormatInt(ids.Add(1), 10)
			for pb.Next() {
				if err := pair(ctx, key); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
}

func BenchmarkUncontended(b *testing.B) {
	for _, ap := range []bool{true, false} {
		rdb := benchRedis(b)
		locks := lockx.New(redislock.New(rdb, redislock.WithPrefix(testPrefix()), redislock.WithAutoPipeline(ap)),
			lockx.WithLease(10*time.Second))
		b.Cleanup(func() { _ = locks.Close() })
		pair := func(ctx context.Context, key string) error {
			l, err := locks.TryAcquire(ctx, key)
			if err != nil {
				return err
			}
			return l.Release(ctx)
		}
		name := "autopipeline"
		if !ap {
			name = "plain"
		}
		for _, g := range []int{1, 64} {
			b.Run(name+"/g"+strconv.Itoa(g), func(b *testing.B) { runPairs(b, g, pair) })
		}
	}
}

// BenchmarkUncontendedBackend is the plain case through the Backend alone:
// the cost of the Redis scripts without the client's bookkeeping.
func BenchmarkUncontendedBackend(b *testing.B) {
	rdb := benchRedis(b)
	be := redislock.New(rdb, redislock.WithPrefix(testPrefix()), redislock.WithAutoPipeline(false))
	b.Cleanup(func() { _ = be.Close() })
	pair := func(ctx context.Context, key string) error {
		o := lockx.NewOwner()
		res, err := be.Acquire(ctx, driver.Request{Key: key, Owner: o, Lease: 10 * time.Second})
		if err != nil || !res.Acquired {
			return err
		}
		return be.Release(ctx, key, o)
	}
	for _, g := range []int{1, 64} {
		b.Run("g"+strconv.Itoa(g), func(b *testing.B) { runPairs(b, g, pair) })
	}
}

var rawRelease = redis.NewScript(`if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0`)

// BenchmarkRaw is the baseline: SET key owner NX PX, then
// compare-and-delete by script (EVALSHA), with a fresh random owner per
// pair as a lock needs (rawPair).
func BenchmarkRaw(b *testing.B) {
	pair := rawPair(benchRedis(b), testPrefix())
	for _, g := range []int{1, 64} {
		b.Run("g"+strconv.Itoa(g), func(b *testing.B) { runPairs(b, g, pair) })
	}
}
