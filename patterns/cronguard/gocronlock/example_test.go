package gocronlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/patterns/cronguard"
	"github.com/lockx-go/lockx/patterns/cronguard/gocronlock"
)

// gocron calls Lock when a job is due and Unlock after it ran. A second
// instance asking for the same trigger is refused, even after the first
// has unlocked: that is the difference from a name lock (gocron #841).
func ExampleLocker() {
	store := memlock.New() // the Redis or PostgreSQL every instance shares
	a, _ := gocronlock.New(lockx.New(store), cronguard.Every(time.Hour))
	b, _ := gocronlock.New(lockx.New(store), cronguard.Every(time.Hour))
	ctx := context.Background()

	lock, err := a.Lock(ctx, "report") // instance a runs the job
	fmt.Println("a:", err)
	_ = lock.Unlock(ctx)

	_, err = b.Lock(ctx, "report") // instance b, a moment later
	fmt.Println("b skipped:", errors.Is(err, cronguard.ErrSkipped))
	// Output:
	// a: <nil>
	// b skipped: true
}
