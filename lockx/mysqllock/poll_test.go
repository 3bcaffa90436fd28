package mysqllock_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/mysqllock"
)

// TestCrossProcessWakeUp: a waiter on another Backend than the holder's
// (as in another process) is woken by polling, long before its 20 s
// backoff.
func TestCrossProcessWakeUp(t *testing.T) {
	db, prefix := openDB(t)
	for _, mode := range []string{"session", "table"} {
		newC := func() *lockx.Client {
			opts := append(fastOpts(prefix), mysqllock.WithPollInterval(700*time.Millisecond))
			if mode == "session" {
				return lockx.New(mysqllock.New(db, opts...))
			}
			return lockx.New(mysqllock.NewTable(db, opts...))
		}
		for _, fair := range []bool{false, true} {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			holder, waiter := newC(), newC()
			opts := []lockx.Option{lockx.WithBackoff(20*time.Second, 20*time.Second)}
			if fair {
				opts = append(opts, lockx.Fair(), lockx.WithQueueTTL(60*time.Second))
			}
			k := "xproc:" + mode
			l, err := holder.Acquire(ctx, k, opts...)
			if err != nil {
				t.Fatal(err)
			}
			d := testenv.HandOver(t, 200*time.Millisecond, func() error { return l.Release(ctx) }, func() error {
				l2, err := waiter.Acquire(ctx, k, opts...)
				if err == nil {
					err = l2.Release(ctx)
				}
				return err
			})
			t.Logf("%s fair=%v: woken %v after release", mode, fair, d)
			_ = holder.Close()
			_ = waiter.Close()
			cancel()
		}
	}
}
