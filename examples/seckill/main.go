// Command seckill is a small flash sale: 3 service instances, 1,000 buyers
// and 100 items, with every purchase serialised by a lockx lock and every
// write to the inventory checked against the lock's fencing token. It runs on
// an embedded in-process backend, so it needs no server:
//
//	go run ./examples/seckill

package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/memlock"
)

// inventory is the resource the locks protect. It remembers the highest
// fencing token that wrote to it and refuses older ones, as a database row
// with a fence column would.
type inventory struct {
	mu    sync.Mutex
	left  int
	fence lockx.Token
}

var errStale = errors.New("stale fencing token")

func (inv *inventory) take(token lockx.Token) (bool, error) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if token < inv.fence {
		return false, errStale
	}
	inv.fence = token
	if inv.left == 0 {
		return false, nil
	}
	inv.left--
	return true, nil
}

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		log.Fatal(err)
	}
}

func newBackend() (func() lockx.Backend, string, func(), error) {
	b := memlock.New()
	return func() lockx.Backend { return b }, "in-process (memlock)", func() {}, nil
}

func run(ctx context.Context, out *os.File) error {
	backend, name, cleanup, err := newBackend()
	if err != nil {
		return err
	}
	defer cleanup()
	fmt.Fprintf(out, "seckill: backend %s\n", name)

	const instances, buyers, stock = 3, 1000, 100
	inv := &inventory{left: stock}
	clients := make([]*lockx.Client, instances)
	for i := range clients {
		clients[i] = lockx.New(backend(), lockx.WithWatchdog(5*time.Second))
		defer clients[i].Close()
	}

	var sold, soldOut, failed atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for b := 0; b < buyers; b++ {
		wg.Add(1)
		go func(b int) {
			defer wg.Done()
			locks := clients[b%instances]
			err := locks.Do(ctx, "sku:1", func(ctx context.Context) error {
				lock, _ := lockx.LockFromContext(ctx)
				ok, err := inv.take(lock.Token())
				switch {
				case err != nil:
					return err
				case ok:
					sold.Add(1)
				default:
					soldOut.Add(1)
				}
				return nil
			}, lockx.WithWait(30*time.Second))
			if err != nil {
				failed.Add(1)
			}
		}(b)
	}
	wg.Wait()
	el := time.Since(start)

	fmt.Fprintf(out, "seckill: %d buyers on %d instances bought %d of %d items in %v (%.0f orders/s)\n",
		buyers, instances, sold.Load(), stock, el.Round(time.Millisecond), float64(buyers)/el.Seconds())
	fmt.Fprintf(out, "seckill: sold out for %d buyers, %d failed, %d items left, oversold %d\n",
		soldOut.Load(), failed.Load(), inv.left, max(0, sold.Load()-stock))
	if sold.Load() != stock || inv.left != 0 || failed.Load() != 0 {
		return fmt.Errorf("seckill: inconsistent sale: sold %d, left %d, failed %d", sold.Load(), inv.left, failed.Load())
	}
	return nil
}
