package rwlock_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/patterns/rwlock"
)

func Example() {
	locks := lockx.New(memlock.New())
	defer locks.Close()
	rw := rwlock.New(locks)
	ctx := context.Background()

	// Readers share the key…
	r1, _ := rw.RLock(ctx, "stock:42")
	r2, _ := rw.RLock(ctx, "stock:42")
	_, err := rw.TryLock(ctx, "stock:42")
	fmt.Println("writer while two read:", errors.Is(err, lockx.ErrNotAcquired))
	_ = r1.Release(ctx)
	_ = r2.Release(ctx)

	// …a writer has it alone.
	w, err := rw.Lock(ctx, "stock:42")
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = rw.TryRLock(ctx, "stock:42")
	fmt.Println("reader while one writes:", errors.Is(err, lockx.ErrNotAcquired))
	_ = w.Release(ctx)
	// Output:
	// writer while two read: true
	// reader while one writes: true
}

func ExampleRW_Downgrade() {
	locks := lockx.New(memlock.New())
	defer locks.Close()
	rw := rwlock.New(locks)
	ctx := context.Background()

	w, err := rw.Lock(ctx, "config")
	if err != nil {
		fmt.Println(err)
		return
	}
	// Write, then keep reading what was written without letting another
	// writer in between.
	r, err := rw.Downgrade(ctx, w)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("read token is the write's:", r.Token() == w.Token())

	// Upgrading back is refused at once rather than deadlocking.
	_, err = rw.Lock(r.Context(), "config")
	fmt.Println("upgrade refused:", errors.Is(err, driver.ErrUpgrade))
	_ = r.Release(ctx)
	// Output:
	// read token is the write's: true
	// upgrade refused: true
}

func ExampleRW_RLock() {
	locks := lockx.New(memlock.New())
	defer locks.Close()
	rw := rwlock.New(locks)

	r, err := rw.RLock(context.Background(), "report:2026-11")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r.Release(context.Background())
	// Do the reading under r.Context(): it is cancelled if the read lock's
	// lease is lost.
	fmt.Println(r.Context().Err() == nil)
	// Output: true
}

func ExampleRW_RDo() {
	locks := lockx.New(memlock.New())
	defer locks.Close()
	rw := rwlock.New(locks)

	err := rw.RDo(context.Background(), "catalog", func(ctx context.Context) error {
		// ctx is cancelled if the read lock is lost.
		fmt.Println("reading")
		return nil
	})
	fmt.Println(err)
	// Output:
	// reading
	// <nil>
}
