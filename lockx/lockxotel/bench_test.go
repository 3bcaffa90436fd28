package lockxotel_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/lockxotel"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/lockx/redislock"
	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// BenchmarkOverhead measures uncontended Acquire+Release with telemetry off
// and with an SDK tracer (always sampling, a discarding span processor) and
// meter; compare the rows of one backend. Redis rows need LOCKX_REDIS_ADDR
// (default 127.0.0.1:6379) to answer.
func BenchmarkOverhead(b *testing.B) {
	backends := []struct {
		name string
		new  func(b *testing.B) driver.Backend
	}{
		{"memlock", func(*testing.B) driver.Backend { return memlock.New() }},
		{"redis", func(b *testing.B) driver.Backend {
			addr := os.Getenv("LOCKX_REDIS_ADDR")
			if addr == "" {
				addr = "127.0.0.1:6379"
			}
			rdb := redis.NewClient(&redis.Options{Addr: addr})
			if err := rdb.Ping(context.Background()).Err(); err != nil {
				b.Skipf("redis at %s: %v", addr, err)
			}
			b.Cleanup(func() { _ = rdb.Close() })
			return redislock.New(rdb, redislock.WithPrefix(fmt.Sprintf("lockxotel-bench-%d:", os.Getpid())))
		}},
	}
	for _, be := range backends {
		for _, mode := range []string{"off", "on"} {
			b.Run(be.name+"/telemetry="+mode, func(b *testing.B) {
				var opts []lockx.Option
				if mode == "on" {
					tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(discard{}))
					mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
					b.Cleanup(func() {
						_ = tp.Shutdown(context.Background())
						_ = mp.Shutdown(context.Background())
					})
					opts = append(opts, lockx.WithObserver(lockxotel.New(tp, mp)))
				}
				c := lockx.New(be.new(b), opts...)
				defer c.Close()
				ctx := context.Background()
				b.ReportAllocs()
				for b.Loop() {
					l, err := c.Acquire(ctx, "bench")
					if err != nil {
						b.Fatal(err)
					}
					if err := l.Release(ctx); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// discard is a span exporter that drops spans, so the benchmark measures
// recording, not export.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }
