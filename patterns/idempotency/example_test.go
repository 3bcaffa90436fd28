package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/patterns/idempotency"
)

type Receipt struct {
	Order  string
	Amount int
}

func Example() {
	locks := lockx.New(memlock.New()) // or redislock.New(rdb), pglock.New(pool)
	defer locks.Close()
	guard, err := idempotency.New(locks)
	if err != nil {
		fmt.Println(err)
		return
	}
	lockx.SetDefaultIdempotency(guard)
	defer lockx.SetDefaultIdempotency(nil)

	charge := func(ctx context.Context) (Receipt, error) {
		fmt.Println("charging order 42")
		return Receipt{Order: "42", Amount: 1999}, nil
	}
	ctx := context.Background()
	r1, _ := lockx.Idempotent(ctx, "charge:42", charge)
	r2, _ := lockx.Idempotent(ctx, "charge:42", charge) // replayed: charge does not run
	fmt.Println(r1 == r2, r2.Amount)
	// Output:
	// charging order 42
	// true 1999
}

var ErrDeclined = errors.New("card declined")

func ExampleWithErrors() {
	locks := lockx.New(memlock.New())
	defer locks.Close()
	guard, _ := idempotency.New(locks, idempotency.WithErrors(ErrDeclined))

	ctx := context.Background()
	for range 2 {
		_, err := lockx.IdempotentWith(ctx, guard, "charge:7", func(ctx context.Context) (Receipt, error) {
			fmt.Println("charging order 7")
			return Receipt{}, fmt.Errorf("bank: %w", ErrDeclined) // terminal: stored
		})
		var stored *lockx.StoredError
		fmt.Println(errors.Is(err, ErrDeclined), errors.As(err, &stored))
	}
	// Output:
	// charging order 7
	// true false
	// true true
}

func ExampleRetry() {
	locks := lockx.New(memlock.New())
	defer locks.Close()
	guard, _ := idempotency.New(locks)

	ctx := context.Background()
	attempt := 0
	for range 3 {
		n, err := lockx.IdempotentWith(ctx, guard, "sync:1", func(ctx context.Context) (int, error) {
			attempt++
			if attempt == 1 {
				return 0, idempotency.Retry(errors.New("upstream timeout")) // not stored
			}
			return attempt, nil
		})
		fmt.Println(n, err)
	}
	// Output:
	// 0 upstream timeout
	// 2 <nil>
	// 2 <nil>
}

func ExampleWithWait() {
	locks := lockx.New(memlock.New())
	defer locks.Close()
	// Wait up to 2 s for a running call with the same key instead of
	// failing with lockx.ErrInProgress.
	guard, _ := idempotency.New(locks, idempotency.WithWait(2*time.Second))

	ctx := context.Background()
	started, done := make(chan struct{}), make(chan int)
	go func() {
		n, _ := lockx.IdempotentWith(ctx, guard, "report", func(ctx context.Context) (int, error) {
			close(started)
			time.Sleep(50 * time.Millisecond)
			return 1, nil
		})
		done <- n
	}()
	<-started
	n, err := lockx.IdempotentWith(ctx, guard, "report", func(ctx context.Context) (int, error) { return 2, nil })
	fmt.Println(n, err, <-done)
	// Output: 1 <nil> 1
}

func ExampleScope() {
	// Two API keys that happen to send the same Idempotency-Key get two
	// different records.
	fmt.Println(idempotency.Scope("key_live_a", "8e03978e"))
	fmt.Println(idempotency.Scope("key_live_b", "8e03978e"))
	// Output:
	// 10:key_live_a:8e03978e
	// 10:key_live_b:8e03978e
}
