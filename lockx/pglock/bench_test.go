package pglock_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/pglock"
)

// Uncontended acquire + release (with fencing token, watchdog off) by 32
// goroutines on distinct keys, against raw pg_try_advisory_lock +
// pg_advisory_unlock pairs, each goroutine on its own pinned pool
// connection, on the same pool:
//
//	go test -run '^$' -bench Uncontended -benchtime 4s ./lockx/pglock/
func BenchmarkUncontended(b *testing.B) {
	const goroutines = 32
	e := newEnv(b, goroutines+8)
	b.Run("raw", func(b *testing.B) {
		var next atomic.Int64
		b.SetParallelism(max(1, goroutines/runtime.GOMAXPROCS(0)))
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			conn, err := e.pool.Acquire(ctx)
			if err != nil {
				b.Error(err)
				return
			}
			defer conn.Release()
			key := next.Add(1) + 1<<40
			var ok bool
			for pb.Next() {
				if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", key).Scan(&ok); err != nil || !ok {
					b.Errorf("lock: %v %v", ok, err)
					return
				}
				if err := conn.QueryRow(ctx, "SELECT pg_advisory_unlock($1)", key).Scan(&ok); err != nil || !ok {
					b.Errorf("unlock: %v %v", ok, err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
	})
	b.Run("pglock", func(b *testing.B) {
		be := pglock.New(e.pool, pglock.WithSchema(e.schema))
		c := lockx.New(be)
		defer c.Close()
		if err := be.Connect(context.Background()); err != nil {
			b.Fatal(err)
		}
		var next atomic.Int64
		b.SetParallelism(max(1, goroutines/runtime.GOMAXPROCS(0)))
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			key := fmt.Sprintf("bench-%d", next.Add(1))
			for pb.Next() {
				l, err := c.TryAcquire(ctx, key, lockx.WithLease(time.Minute))
				if err != nil {
					b.Error(err)
					return
				}
				if err := l.Release(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
	})
}
