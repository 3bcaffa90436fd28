package semaphore_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/lockx/redislock"
	"github.com/lockx-go/lockx/patterns/semaphore"
)

// BenchmarkHandoff is the semaphore workload: 64 goroutines on one
// semaphore with N = 8, against a plain lock (N = 1, barging or Fair) on the
// same workload,
// with an empty critical section, so ns/op is the handoff cost. The
// semaphore cases fail if more than 8 holders are ever seen at once.
func BenchmarkHandoff(b *testing.B) {
	backends := map[string]func(b *testing.B) driver.Backend{
		"memlock": func(*testing.B) driver.Backend { return memlock.New() },
		"redis": func(b *testing.B) driver.Backend {
			rdb := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(b), PoolSize: 128})
			b.Cleanup(func() { _ = rdb.Close() })
			return redislock.New(rdb, redislock.WithPrefix("lockxbench:"+string(lockx.NewOwner())[:8]+":"))
		},
	}
	for _, name := range []string{"memlock", "redis"} {
		for _, kind := range []string{"lock", "lock-fair", "semaphore", "semaphore-nonfair"} {
			b.Run(name+"/"+kind, func(b *testing.B) {
				be := backends[name](b)
				c := lockx.New(be, lockx.WithBackoff(time.Millisecond, 20*time.Millisecond))
				defer c.Close()
				key := "bench:" + string(lockx.NewOwner())
				sem := semaphore.New(c, key, 8)
				if kind == "semaphore-nonfair" {
					sem = semaphore.New(c, key, 8, semaphore.NonFair())
				}
				ctx := context.Background()
				if n := driver.Notifier(nil); driver.As(be, &n) { // subscribe outside the timing
					_, cancel, err := n.Watch(ctx, key, lockx.NewOwner())
					if err != nil {
						b.Fatal(err)
					}
					cancel()
				}
				var holders, peak atomic.Int64
				b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						var release func(context.Context) error
						if kind == "lock" || kind == "lock-fair" {
							var opts []lockx.Option
							if kind == "lock-fair" {
								opts = append(opts, lockx.Fair())
							}
							l, err := c.Acquire(ctx, key, opts...)
							if err != nil {
								b.Error(err)
								return
							}
							release = l.Release
						} else {
							p, err := sem.Acquire(ctx)
							if err != nil {
								b.Error(err)
								return
							}
							release = p.Release
						}
						n := holders.Add(1)
						for m := peak.Load(); n > m && !peak.CompareAndSwap(m, n); m = peak.Load() {
						}
						holders.Add(-1)
						_ = release(ctx)
					}
				})
				if kind != "lock" && kind != "lock-fair" && peak.Load() > 8 {
					b.Fatalf("%d holders of an 8-permit semaphore at once", peak.Load())
				}
				b.ReportMetric(float64(peak.Load()), "peak-holders")
			})
		}
	}
}
