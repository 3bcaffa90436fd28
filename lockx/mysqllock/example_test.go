package mysqllock_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/mysqllock"
)

// exampleDSN is the database the examples use.
func exampleDSN() string {
	dsn := os.Getenv("LOCKX_TEST_MYSQL_DSN")
	if dsn == "" {
		dsn = "root@tcp(127.0.0.1:3306)/test"
	}
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + "interpolateParams=true"
}

func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := sql.Open("mysql", exampleDSN())
	if err != nil {
		panic(err)
	}
	defer db.Close()

	// Session locks (GET_LOCK) on at most 4 pinned connections of db.
	locks := lockx.New(mysqllock.New(db, mysqllock.WithTablePrefix("lockx_example_")))
	defer locks.Close() // before db.Close

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

func ExampleNewTable() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := sql.Open("mysql", exampleDSN())
	if err != nil {
		panic(err)
	}
	defer db.Close()

	// Lease rows instead of session locks: for a ProxySQL or another proxy
	// that does not keep a client on one server session.
	locks := lockx.New(mysqllock.NewTable(db, mysqllock.WithTablePrefix("lockx_example_")))
	defer locks.Close()

	err = locks.Do(ctx, "report:daily", func(ctx context.Context) error {
		// The watchdog renews the row's expires_at while this runs; ctx
		// ends if the lease is lost.
		fmt.Println("generating the report")
		return nil
	}, lockx.WithWatchdog(10*time.Second))
	fmt.Println("done:", err)
	// Output:
	// generating the report
	// done: <nil>
}

func ExampleMigrate() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := sql.Open("mysql", exampleDSN())
	if err != nil {
		panic(err)
	}
	defer db.Close()
	// At deploy time, as a user that may create tables; application
	// Backends then run WithoutAutoMigrate.
	err = mysqllock.Migrate(ctx, db, mysqllock.WithTablePrefix("lockx_example_"))
	fmt.Println(err)
	// Output: <nil>
}
