package semaphore_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/patterns/semaphore"
)

func Example() {
	locks := lockx.New(memlock.New())
	defer locks.Close()
	ctx := context.Background()

	// At most two PDF renderings at once, across every process.
	sem := semaphore.New(locks, "pdf-render", 2)
	p1, _ := sem.Acquire(ctx)
	p2, _ := sem.Acquire(ctx)
	_, err := sem.TryAcquire(ctx)
	fmt.Println("third refused:", errors.Is(err, lockx.ErrNotAcquired))

	u, _ := sem.Usage(ctx)
	fmt.Println("in use:", u.InUse)

	_ = p1.Release(ctx)
	p3, err := sem.TryAcquire(ctx)
	fmt.Println("after a release:", err == nil)
	_ = p2.Release(ctx)
	_ = p3.Release(ctx)
	// Output:
	// third refused: true
	// in use: 2
	// after a release: true
}

func ExampleSemaphore_AcquireN() {
	locks := lockx.New(memlock.New())
	defer locks.Close()
	ctx := context.Background()

	// A bulk export takes 3 of the 4 connection slots at once.
	sem := semaphore.New(locks, "db-slots", 4)
	bulk, err := sem.AcquireN(ctx, 3)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer bulk.Release(ctx)
	fmt.Println("holding", bulk.N())
	// Output: holding 3
}

func ExampleSemaphore_SetLimit() {
	locks := lockx.New(memlock.New())
	defer locks.Close()
	ctx := context.Background()

	sem := semaphore.New(locks, "workers", 2)
	p1, _ := sem.Acquire(ctx)
	p2, _ := sem.Acquire(ctx)
	// Shrinking revokes nothing: both permits stay valid, new grants wait
	// until usage is below the new limit.
	_ = sem.SetLimit(1)
	fmt.Println("held permits kept:", p1.Context().Err() == nil && p2.Context().Err() == nil)
	_ = p1.Release(ctx)
	_, err := sem.TryAcquire(ctx)
	fmt.Println("still full:", errors.Is(err, lockx.ErrNotAcquired))
	_ = p2.Release(ctx)
	// Output:
	// held permits kept: true
	// still full: true
}

func ExampleSemaphore_Do() {
	locks := lockx.New(memlock.New())
	defer locks.Close()
	sem := semaphore.New(locks, "crawler", 4)

	err := sem.Do(context.Background(), func(ctx context.Context) error {
		// At most 4 of these run at once, fleet-wide; ctx is cancelled if
		// the permit is lost.
		fmt.Println("fetching")
		return nil
	})
	fmt.Println(err)
	// Output:
	// fetching
	// <nil>
}
