package lockx_test

import (
	"context"
	"fmt"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/memlock"
)

// List the locks held under a prefix through the backend's Inspector.
func ExampleInspector() {
	b := memlock.New()
	locks := lockx.New(b)
	defer locks.Close()
	ctx := context.Background()
	_, _ = locks.Acquire(ctx, "jobs/reindex")
	_, _ = locks.Acquire(ctx, "jobs/report")

	_ = b.Locks(ctx, "jobs/", func(li lockx.LockInfo) bool {
		fmt.Println(li.Key, li.TTL > 0)
		return true
	})
	// Output:
	// jobs/reindex true
	// jobs/report true
}

// Evict a stuck holder: its token is fenced off and the lock freed.
func ExampleForceUnlock() {
	b := memlock.New()
	locks := lockx.New(b)
	defer locks.Close()
	ctx := context.Background()
	stuck, _ := locks.Acquire(ctx, "jobs/reindex")

	evicted, err := lockx.ForceUnlock(ctx, b, "jobs/reindex")
	fmt.Println(err, evicted.Token == stuck.Token())
	fmt.Println(b.Fence(ctx, "jobs/reindex", stuck.Token()))
	// Output:
	// <nil> true
	// lockx: stale fencing token 1 for "jobs/reindex": 2 already seen
}

// Flag holders older than a threshold, e.g. to page someone.
func ExampleWatchLongHolders() {
	b := memlock.New()
	locks := lockx.New(b)
	defer locks.Close()
	_, _ = locks.Acquire(context.Background(), "jobs/forgotten")

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_ = lockx.WatchLongHolders(ctx, b, lockx.LongHolderWatch{
		Threshold: 50 * time.Millisecond,
		Interval:  20 * time.Millisecond,
		OnLongHolder: func(li lockx.LockInfo) {
			fmt.Println("long holder:", li.Key)
		},
	})
	// Output: long holder: jobs/forgotten
}

// An Observer sees every acquisition, renewal and release; lockx/lockxotel
// is the OpenTelemetry one. Embed NopObserver and keep what you need.
func ExampleWithObserver() {
	locks := lockx.New(memlock.New(), lockx.WithObserver(printObserver{}))
	defer locks.Close()
	_ = locks.Do(context.Background(), "k", func(context.Context) error { return nil })
	// Output:
	// acquired k ok
	// held k ok
}

type printObserver struct{ lockx.NopObserver }

func (printObserver) Acquired(_ context.Context, e lockx.AcquireEvent) {
	fmt.Println("acquired", e.Key, e.Status)
}

func (printObserver) HoldEnded(e lockx.HoldEvent) { fmt.Println("held", e.Key, e.Status) }
