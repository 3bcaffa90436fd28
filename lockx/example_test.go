package lockx_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/memlock"
)

func Example() {
	locks := lockx.New(memlock.New())
	defer locks.Close()
	ctx := context.Background()

	lock, err := locks.Acquire(ctx, "order:42")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer lock.Release(ctx)

	// Another owner is refused while the lock is held.
	_, err = locks.TryAcquire(ctx, "order:42")
	fmt.Println(errors.Is(err, lockx.ErrNotAcquired))
	// Output: true
}

func ExampleClient_Do() {
	locks := lockx.New(memlock.New())
	defer locks.Close()

	err := locks.Do(context.Background(), "report:daily", func(ctx context.Context) error {
		// ctx is cancelled if the lock is lost: check it before each write.
		fmt.Println("running the report")
		return ctx.Err()
	})
	fmt.Println(err)
	// Output:
	// running the report
	// <nil>
}

func ExampleClient_Acquire_reentrant() {
	locks := lockx.New(memlock.New())
	defer locks.Close()
	ctx := context.Background()

	outer, _ := locks.Acquire(ctx, "account:7")
	// The lock's context carries its owner: acquiring again under it
	// re-enters instead of deadlocking, and keeps the fencing token.
	inner, _ := locks.Acquire(outer.Context(), "account:7")
	fmt.Println(inner.Token() == outer.Token())
	_ = inner.Release(ctx)
	_ = outer.Release(ctx) // freed only now
	// Output: true
}

func ExampleWithLease() {
	locks := lockx.New(memlock.New())
	defer locks.Close()

	lock, _ := locks.Acquire(context.Background(), "job:1", lockx.WithLease(50*time.Millisecond))
	<-lock.Lost() // no watchdog: the lease ends unless extended
	fmt.Println(context.Cause(lock.Context()))
	// Output: lockx: lock lost
}

func ExampleWithWait() {
	locks := lockx.New(memlock.New())
	defer locks.Close()
	ctx := context.Background()

	held, _ := locks.Acquire(ctx, "inventory:9")
	defer held.Release(ctx)
	_, err := locks.Acquire(ctx, "inventory:9", lockx.WithWait(20*time.Millisecond))
	fmt.Println(errors.Is(err, lockx.ErrNotAcquired))
	// Output: true
}

func ExampleLock_Token() {
	locks := lockx.New(memlock.New())
	defer locks.Close()
	ctx := context.Background()

	first, _ := locks.Acquire(ctx, "doc:5")
	_ = first.Release(ctx)
	second, _ := locks.Acquire(ctx, "doc:5")
	defer second.Release(ctx)
	// A resource that remembers the highest token it saw rejects the
	// first holder's late writes.
	fmt.Println(second.Token() > first.Token())
	// Output: true
}
