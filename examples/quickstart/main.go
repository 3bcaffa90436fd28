// Command quickstart is the README's quick start, kept as a program so that
// it is built and run by every `go test ./...`: take a lock with Do, hold
// one explicitly with Acquire and Release, and watch a second taker be
// refused. It runs on the in-process backend, so nothing needs installing;
// set LOCKX_REDIS_URL (e.g. redis://127.0.0.1:6379/0) to run it on Redis.
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/lockx/redislock"
)

func main() {
	// Every call gets a deadline: Acquire without lockx.WithWait waits
	// for the lock until its context ends.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	locks, closeLocks := open()
	defer closeLocks()

	// Do acquires, runs fn with a context that is cancelled if the lock is
	// lost, and always releases.
	err := locks.Do(ctx, "order:42", func(ctx context.Context) error {
		lock, _ := lockx.LockFromContext(ctx)
		fmt.Println("shipping order 42 under fencing token", lock.Token()) // hand the token to the resource you write
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}

	// Or hold a lock explicitly; WithWait bounds the wait.
	lock, err := locks.Acquire(ctx, "order:42", lockx.WithWait(2*time.Second))
	if err != nil {
		log.Fatal(err) // errors.Is(err, lockx.ErrNotAcquired): still busy after 2 s
	}
	fmt.Println("holding order:42, token", lock.Token())

	// While it is held, anyone else is refused (TryAcquire does not wait).
	if _, err := locks.TryAcquire(ctx, "order:42"); errors.Is(err, lockx.ErrNotAcquired) {
		fmt.Println("a second taker is refused:", err)
	}
	select {
	case <-lock.Lost(): // the lease is gone: stop writing
		log.Fatal("lock lost")
	default:
	}
	if err := lock.Release(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("released")
}

// open returns a lockx client on Redis if LOCKX_REDIS_URL is set (e.g.
// redis://127.0.0.1:6379/0), else on the in-process backend, and the
// function that closes it.
func open() (*lockx.Client, func()) {
	url := os.Getenv("LOCKX_REDIS_URL")
	if url == "" {
		locks := lockx.New(memlock.New()) // in-process: one process only
		return locks, func() { _ = locks.Close() }
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		log.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	locks := lockx.New(redislock.New(rdb)) // or pglock.New(pool), zklock.Dial(ctx, servers), …
	return locks, func() { _ = locks.Close(); _ = rdb.Close() }
}
