package redislock_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/redislock"
)

// The examples need a Redis on 127.0.0.1:6379. Each uses a prefix of its
// own, so that runs sharing the server never meet; production code keeps
// the default or one prefix per application.
func examplePrefix() redislock.Option {
	return redislock.WithPrefix("example:" + rand.Text()[:8] + ":")
}

func ExampleNew() {
	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{"127.0.0.1:6379"}})
	defer rdb.Close()
	locks := lockx.New(redislock.New(rdb, examplePrefix()))
	defer locks.Close()

	ctx := context.Background()
	lock, err := locks.TryAcquire(ctx, "order:42")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("held:", lock.Key(), "token issued:", lock.Token() > 0)

	_, err = locks.TryAcquire(ctx, "order:42")
	fmt.Println("held elsewhere:", errors.Is(err, lockx.ErrNotAcquired))

	fmt.Println("release:", lock.Release(ctx))
	// Output:
	// held: order:42 token issued: true
	// held elsewhere: true
	// release: <nil>
}

// Acquire waits for the lock: the release wakes the waiter through Redis
// pub/sub, and its fencing token is larger than the previous holder's.
func Example_acquire() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	prefix := examplePrefix()
	first := lockx.New(redislock.New(rdb, prefix))
	defer first.Close()
	second := lockx.New(redislock.New(rdb, prefix)) // another process, say
	defer second.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	held, err := first.Acquire(ctx, "report:daily")
	if err != nil {
		fmt.Println(err)
		return
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		_ = held.Release(ctx)
	}()

	next, err := second.Acquire(ctx, "report:daily", lockx.WithWait(5*time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer next.Release(ctx)
	fmt.Println("acquired after the release; token increased:", next.Token() > held.Token())
	// Output:
	// acquired after the release; token increased: true
}

// Do runs a critical section under the lock and releases it afterwards; the
// function's context ends if the lock is lost.
func Example_do() {
	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{"127.0.0.1:6379"}})
	defer rdb.Close()
	locks := lockx.New(redislock.New(rdb, examplePrefix()))
	defer locks.Close()

	err := locks.Do(context.Background(), "stock:sku-1", func(ctx context.Context) error {
		fmt.Println("updating stock")
		return nil
	}, lockx.Fair())
	fmt.Println("done:", err)
	// Output:
	// updating stock
	// done: <nil>
}

// A set of keys in one script call: Client.AcquireMany asks the Backend's
// AcquireMany for the whole set, all or nothing, each key with its own
// fencing token.
func ExampleBackend_AcquireMany() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	locks := lockx.New(redislock.New(rdb, examplePrefix()), lockx.WithLease(10*time.Second))
	defer locks.Close()

	ctx := context.Background()
	set, err := locks.AcquireMany(ctx, []string{"account:7", "account:3"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("held:", set.Keys(), "tokens issued:", set.Token("account:3") > 0 && set.Token("account:7") > 0)

	// Another caller wanting an overlapping set gets none of it.
	_, err = locks.TryAcquireMany(ctx, []string{"account:3", "account:9"})
	fmt.Println("overlapping set:", errors.Is(err, lockx.ErrNotAcquired))

	fmt.Println("release:", set.Release(ctx))
	// Output:
	// held: [account:3 account:7] tokens issued: true
	// overlapping set: true
	// release: <nil>
}
