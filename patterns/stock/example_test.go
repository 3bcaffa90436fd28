package stock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/patterns/stock"
)

func Example() {
	ctx := context.Background()
	locks := lockx.New(memlock.New()) // redislock or pglock in production
	defer locks.Close()

	sku := stock.New(locks, "sku:1001", stock.WithSegments(4)) // one unit per buyer by default
	if _, err := sku.Init(ctx, 2); err != nil {
		panic(err)
	}
	for _, user := range []string{"alice", "alice", "bob", "carol"} {
		o, err := sku.Buy(ctx, user, 1)
		switch {
		case errors.Is(err, stock.ErrLimit):
			fmt.Println(user, "already bought")
		case errors.Is(err, stock.ErrSoldOut):
			fmt.Println(user, "sold out")
		case err != nil:
			panic(err)
		default:
			fmt.Println(user, "bought", o.Qty)
		}
	}
	r, _ := sku.Reconcile(ctx)
	fmt.Printf("supplied %d = available %d + confirmed %d + reserved %d\n", r.Supplied, r.Available, r.Confirmed, r.Reserved)
	// Output:
	// alice bought 1
	// alice already bought
	// bob bought 1
	// carol sold out
	// supplied 2 = available 0 + confirmed 2 + reserved 0
}

func ExampleStock_Reserve() {
	ctx := context.Background()
	locks := lockx.New(memlock.New())
	defer locks.Close()
	sku := stock.New(locks, "sku:1002")
	if _, err := sku.Init(ctx, 1); err != nil {
		panic(err)
	}

	o, err := sku.Reserve(ctx, "alice", 1, 15*time.Minute) // hold the unit while alice pays
	if err != nil {
		panic(err)
	}
	if _, err := sku.Buy(ctx, "bob", 1); errors.Is(err, stock.ErrSoldOut) {
		fmt.Println("bob: sold out while alice pays")
	}
	if err := sku.Confirm(ctx, o); err != nil { // payment succeeded
		panic(err)
	}
	fmt.Println("alice confirmed")
	// Output:
	// bob: sold out while alice pays
	// alice confirmed
}

func ExampleWithMode() {
	ctx := context.Background()
	locks := lockx.New(memlock.New())
	defer locks.Close()
	// The classic segment-lock design: a lock per segment, read-modify-write under it.
	sku := stock.New(locks, "sku:1003", stock.WithMode(stock.Locked), stock.WithSegments(16))
	if _, err := sku.Init(ctx, 100); err != nil {
		panic(err)
	}
	o, err := sku.Buy(ctx, "alice", 1)
	if err != nil {
		panic(err)
	}
	n, _ := sku.Available(ctx)
	fmt.Println(o.Qty, "sold,", n, "left")
	// Output: 1 sold, 99 left
}

func ExampleStock_Cancel() {
	ctx := context.Background()
	locks := lockx.New(memlock.New())
	defer locks.Close()
	sku := stock.New(locks, "sku:1004", stock.WithOrders(memlock.NewOrderStore()))
	if _, err := sku.Init(ctx, 1); err != nil {
		panic(err)
	}
	o, _ := sku.Buy(ctx, "alice", 1)
	if err := sku.Cancel(ctx, o); err != nil {
		panic(err)
	}
	n, _ := sku.Available(ctx)
	fmt.Println(n, "available again")
	// Output: 1 available again
}
