// Command loadgen runs a flash sale against the seckill service: N buyers,
// each retrying with its one Idempotency-Key, a progress line, and a report
// (sold, left, oversold, duplicate charges, p50/p99, orders/s). By default
// it starts -replicas in-process service instances sharing the backends;
// -target points it at running services instead.
//
//	go run ./examples/seckill/loadgen -replicas 3 -buyers 3000
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/lockx-go/lockx/examples/seckill/shop"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := shop.LoadMain(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
