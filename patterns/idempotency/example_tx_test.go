package idempotency_test

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/lockx/pglock"
	"github.com/lockx-go/lockx/patterns/idempotency"
)

// The unique-index fallback: the order row and the idempotency record commit
// in one transaction, so even a lock granted twice creates one order.
func ExampleDoTx() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://postgres@127.0.0.1:5432/test")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()
	locks := lockx.New(pglock.New(pool))
	defer locks.Close()
	store := pglock.NewResultStore(pool)
	guard, _ := idempotency.New(locks, idempotency.WithStore(store))

	orderID, err := idempotency.DoTx(ctx, guard, store, "order:checkout-7f3a", func(ctx context.Context, tx pgx.Tx) (int64, error) {
		var id int64
		err := tx.QueryRow(ctx, `INSERT INTO orders (cart) VALUES ($1) RETURNING id`, "7f3a").Scan(&id)
		return id, err
	})
	fmt.Println(orderID, err)
}

func ExampleStep() {
	locks := lockx.New(memlock.New())
	defer locks.Close()
	guard, _ := idempotency.New(locks)
	ctx := context.Background()

	attempt := 0
	checkout := func(ctx context.Context) (string, error) {
		attempt++
		charge, err := idempotency.Step(ctx, guard, "order:9", "charge", func(ctx context.Context) (string, error) {
			fmt.Println("charging")
			return "ch_9", nil
		})
		if err != nil {
			return "", err
		}
		return idempotency.Step(ctx, guard, "order:9", "ship", func(ctx context.Context) (string, error) {
			if attempt == 1 {
				return "", idempotency.Retry(fmt.Errorf("warehouse down"))
			}
			fmt.Println("shipping")
			return charge + " shipped", nil
		})
	}
	_, err := lockx.IdempotentWith(ctx, guard, "order:9", checkout)
	fmt.Println(err)
	res, err := lockx.IdempotentWith(ctx, guard, "order:9", checkout) // resumes at "ship"
	fmt.Println(res, err)
	// Output:
	// charging
	// warehouse down
	// shipping
	// ch_9 shipped <nil>
}
