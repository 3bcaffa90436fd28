// Command otelprom serves lockx's OpenTelemetry metrics to Prometheus: an
// OTel MeterProvider with the Prometheus exporter as its reader, handed to
// lockxotel, and the exporter's registry served on /metrics.
//
//	go run . -redis redis://127.0.0.1:6379/0 -addr 127.0.0.1:9464
//	curl -s 127.0.0.1:9464/metrics | grep lockx_
//
// It runs a small workload (a few goroutines taking one lock in turn) so
// that every metric has data. It lives in its own module so that the
// Prometheus client never enters the build of lockx users.
package main

import (
	"context"
	"errors"
	"flag"
	"log"
	"net/http"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/breaker"
	"github.com/lockx-go/lockx/lockx/lockxotel"
	"github.com/lockx-go/lockx/lockx/redislock"
)

func main() {
	redisURL := flag.String("redis", "redis://127.0.0.1:6379/0", "Redis URL")
	addr := flag.String("addr", "127.0.0.1:9464", "listen address of /metrics")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		log.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer mp.Shutdown(context.Background())
	obs := lockxotel.New(nil, mp) // metrics only; pass a TracerProvider for spans

	opts, err := redis.ParseURL(*redisURL)
	if err != nil {
		log.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	backend := breaker.Wrap(redislock.New(rdb), breaker.OnStateChange(obs.BreakerStateChanged))
	locks := lockx.New(backend, lockx.WithObserver(obs))
	defer locks.Close()

	srv := &http.Server{Addr: *addr, Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Print(err)
			stop()
		}
	}()
	log.Printf("metrics on http://%s/metrics", *addr)

	done := make(chan struct{})
	for range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for ctx.Err() == nil {
				_ = locks.Do(ctx, "otelprom:demo", func(context.Context) error {
					time.Sleep(20 * time.Millisecond)
					return nil
				}, lockx.WithWait(time.Second))
			}
		}()
	}
	<-ctx.Done()
	for range 4 {
		<-done
	}
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shut)
}
