package pglock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/pglock"
)

// exampleDSN is the database the examples use.
func exampleDSN() string {
	if dsn := os.Getenv("LOCKX_TEST_POSTGRES_URL"); dsn != "" {
		return dsn
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, exampleDSN())
	if err != nil {
		panic(err)
	}
	defer pool.Close()

	locks := lockx.New(pglock.New(pool, pglock.WithSchema("lockx_example")))
	defer locks.Close()

	lock, err := locks.Acquire(ctx, "order:42")
	if err != nil {
		fmt.Println("not acquired:", err)
		return
	}
	defer lock.Release(ctx)
	// Pass lock.Token() along with every write the lock protects; the
	// resource rejects tokens lower than the highest it has seen.
	fmt.Println("holding order:42 with a token:", lock.Token() > 0)

	_, err = locks.TryAcquire(ctx, "order:42")
	fmt.Println("second owner:", err)
	// Output:
	// holding order:42 with a token: true
	// second owner: lockx: acquire "order:42": lock not acquired
}

func ExampleTxLock() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, exampleDSN())
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	if err := pglock.Migrate(ctx, pool, pglock.WithSchema("lockx_example")); err != nil {
		panic(err)
	}

	// The lock and the write it protects commit (or roll back) together.
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		token, err := pglock.TxLock(ctx, tx, "account:7", pglock.WithSchema("lockx_example"))
		if err != nil {
			return err
		}
		fmt.Println("locked for this transaction:", token > 0)
		return nil // UPDATE accounts ... WHERE fence <= token, in tx
	})
	fmt.Println("committed:", err == nil)
	// Output:
	// locked for this transaction: true
	// committed: true
}

func ExampleMigrate() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, exampleDSN())
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	// At deploy time, as a role that may create the schema; application
	// Backends then run WithoutAutoMigrate.
	err = pglock.Migrate(ctx, pool, pglock.WithSchema("lockx_example"))
	fmt.Println(err)
	// Output: <nil>
}

// Where others choose key names (tenants, end users), derive advisory-lock
// ids under a secret of the deployment, so that nobody can compute two
// names that share one. Every process that locks these keys must use the
// same secret (see WithKeySecret); a collision found anyway is refused
// with ErrKeyCollision.
func ExampleWithKeySecret() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, exampleDSN())
	if err != nil {
		panic(err)
	}
	defer pool.Close()

	secret := []byte(os.Getenv("LOCKX_KEY_SECRET")) // 16 bytes or more, from your secret store
	locks := lockx.New(pglock.New(pool, pglock.WithSchema("lockx_example"), pglock.WithKeySecret(secret)))
	defer locks.Close()

	lock, err := locks.Acquire(ctx, "tenant-7/invoice:42")
	if errors.Is(err, pglock.ErrKeyCollision) {
		fmt.Println("another key with the same id is held")
		return
	}
	if err != nil {
		panic(err)
	}
	defer lock.Release(ctx)
}

// Every process that shares locks uses one publish delay, as it uses one
// schema and namespace. A hold younger than the delay has no row yet, yet
// another Backend's owner check still recognises it: it looks again while
// the key is held by a hold without a row. WithPublishDelay(0) writes the
// row in every grant instead.
func ExampleWithPublishDelay() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, exampleDSN())
	if err != nil {
		panic(err)
	}
	defer pool.Close()

	delay := pglock.WithPublishDelay(20 * time.Millisecond)
	locks := lockx.New(pglock.New(pool, pglock.WithSchema("lockx_example"), delay))
	defer locks.Close()
	lock, err := locks.Acquire(ctx, "report:daily")
	if err != nil {
		panic(err)
	}
	defer lock.Release(ctx)

	// Another process (here another Backend) asks at once.
	other := pglock.New(pool, pglock.WithSchema("lockx_example"), delay)
	defer other.Close()
	ttl, err := other.TTL(ctx, "report:daily", lock.Owner())
	fmt.Println("seen by another process:", err == nil && ttl > 0)
	// Output:
	// seen by another process: true
}
