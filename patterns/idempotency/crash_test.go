package idempotency_test

import (
	"context"
	"crypto/rand"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/redislock"
	"github.com/lockx-go/lockx/patterns/idempotency"
	"github.com/lockx-go/lockx/patterns/idempotency/idemtest"
)

const (
	crashLease     = time.Second
	crashRetention = time.Hour
)

// crashGuard is a Guard over the Redis at addr under prefix, as every
// process of the crash test makes it, and the client for the work counter.
func crashGuard(addr, prefix string) (*idempotency.Guard, *redis.Client, func(), error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	locks := lockx.New(redislock.New(rdb, redislock.WithPrefix(prefix)))
	g, err := idempotency.New(locks, idempotency.WithRetention(crashRetention),
		idempotency.WithLockOptions(lockx.WithWatchdog(crashLease)))
	closeAll := func() { _ = locks.Close(); _ = rdb.Close() }
	if err != nil {
		closeAll()
	}
	return g, rdb, closeAll, err
}

// work counts its runs in Redis, so that runs in every process count.
func work(rdb *redis.Client, prefix, key string) func(context.Context) ([]byte, error) {
	return func(ctx context.Context) ([]byte, error) {
		n, err := rdb.Incr(ctx, prefix+"work:"+key).Result()
		return []byte(strconv.FormatInt(n, 10)), err
	}
}

// The holder: runs the work under the key and stays inside it until killed.
var _ = testenv.Role("idempotency-holder", func(args []string) error {
	addr, prefix, key := args[0], args[1], args[2]
	g, rdb, closeAll, err := crashGuard(addr, prefix)
	if err != nil {
		return err
	}
	defer closeAll()
	_, _, err = g.Run(context.Background(), key, nil, func(ctx context.Context) ([]byte, error) {
		if _, err := work(rdb, prefix, key)(ctx); err != nil {
			return nil, err
		}
		testenv.Say("running")
		<-ctx.Done() // the lock lost: never, while the watchdog renews it
		return nil, context.Cause(ctx)
	})
	return errors.Join(errors.New("the holder's call ended"), err)
})

// TestCrashedProcessRedis: a process SIGKILLed inside the work keeps its
// key in progress while it lives (its watchdog renews the lease), and the
// key is free for a retry one lease after the kill — not after the
// retention of an hour.
func TestCrashedProcessRedis(t *testing.T) {
	addr := testenv.RedisAddr(t)
	prefix, key := "lockxtest:idemcrash:"+rand.Text()+":", "order-1"
	g, rdb, closeAll, err := crashGuard(addr, prefix)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll()
	holder := testenv.StartChild(t, "idempotency-holder", addr, prefix, key)
	holder.Expect(t, "running", 30*time.Second)
	idemtest.Crash{
		Lease: crashLease, Hold: 3 * crashLease, Retention: crashRetention,
		Call: func(t testing.TB) idemtest.Verdict {
			_, replayed, err := g.Run(context.Background(), key, nil, work(rdb, prefix, key))
			switch {
			case errors.Is(err, lockx.ErrInProgress):
				return idemtest.InProgress
			case err != nil:
				t.Fatal(err)
			case replayed:
				return idemtest.Replayed
			}
			return idemtest.Ran
		},
		Work: func(t testing.TB) int64 {
			n, err := rdb.Get(context.Background(), prefix+"work:"+key).Int64()
			if err != nil && !errors.Is(err, redis.Nil) {
				t.Fatal(err)
			}
			return n
		},
		Kill: holder.Kill,
	}.Run(t)
}
