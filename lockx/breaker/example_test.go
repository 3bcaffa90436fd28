package breaker_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/breaker"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/memlock"
)

// Wrap the backend once, before handing it to the client. Patterns still
// find its capabilities (here memlock's FenceStore) through the wrapper.
func Example() {
	b := breaker.Wrap(memlock.New(),
		breaker.WithFailures(5),
		breaker.WithOpenTimeout(5*time.Second),
		breaker.OnStateChange(func(name, from, to string) { fmt.Println("breaker", from, "->", to) }),
	)
	locks := lockx.New(b)
	defer locks.Close()

	err := locks.Do(context.Background(), "invoice:7", func(ctx context.Context) error {
		l, _ := lockx.LockFromContext(ctx)
		var fs driver.FenceStore
		driver.As(b, &fs)
		return fs.Fence(ctx, "invoice:7", l.Token())
	})
	br, _ := breaker.Of(b)
	fmt.Println(err, br.State())
	// Output: <nil> closed
}

// down is a backend that cannot be reached.
type down struct{ driver.Backend }

func (down) Acquire(context.Context, driver.Request) (driver.Result, error) {
	return driver.Result{}, driver.Unavailable("acquire", errors.New("connection refused"))
}

func (down) Release(context.Context, string, lockx.Owner) error {
	return driver.Unavailable("release", errors.New("connection refused"))
}

// Once open, the breaker refuses at once: Acquire does not wait out its
// budget against a dead backend.
func Example_failFast() {
	locks := lockx.New(breaker.Wrap(down{memlock.New()}, breaker.WithFailures(2)))
	defer locks.Close()
	ctx := context.Background()
	// Two failures (the attempt and the release withdrawing it) open it.
	_, err := locks.TryAcquire(ctx, "k")
	fmt.Println(errors.Is(err, lockx.ErrUnavailable), errors.Is(err, breaker.ErrCircuitOpen))
	start := time.Now()
	_, err = locks.Acquire(ctx, "k", lockx.WithWait(time.Minute))
	fmt.Println(errors.Is(err, lockx.ErrUnavailable), errors.Is(err, breaker.ErrCircuitOpen), time.Since(start) < time.Second)
	// Output:
	// true false
	// true true true
}
