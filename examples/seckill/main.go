// Command seckill is a flash-sale service that shows lockx working end to
// end: an Echo v4 service selling through patterns/stock, POST /orders
// behind the Idempotency-Key middleware, an admin restock behind the
// fencing middleware, a cronguard job closing expired reservations once per
// trigger, and a live page. With no server configured it runs on an
// embedded miniredis (redislock's real Lua scripts) and an in-process
// order store:
//
//	go run ./examples/seckill                 # serve; open the printed URL
//	go run ./examples/seckill -loadgen        # 3 replicas, a sale, the report
//	go run ./examples/seckill/loadgen -h      # the load generator's flags
//
// Real backends: LOCKX_REDIS_URL=redis://127.0.0.1:6379/0 and/or
// LOCKX_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/test. See
// docs/seckill.md.
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
	code := shop.ServeMain(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
