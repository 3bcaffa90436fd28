package redislock_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/redislock"
)

// TestMemoryPerLock holds 100k locks ("order:N" under the default prefix) on
// a throwaway server and logs Redis's used_memory growth per lock, fence
// included (the token is a field of the lock hash).
// Run: go test -run MemoryPerLock -v ./lockx/redislock
func TestMemoryPerLock(t *testing.T) {
	if testing.Short() {
		t.Skip("holds 100k locks")
	}
	const n = 100_000
	srv := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 32})
	t.Cleanup(func() { _ = rdb.Close() })
	b := redislock.New(rdb)
	t.Cleanup(func() { _ = b.Close() })
	ctx := ctxT(t, 5*time.Minute)

	// Warm up (scripts cached, connections open) before the baseline.
	o := lockx.NewOwner()
	mustGrant(t, b, req("warm-up", o, time.Second))
	if err := b.Release(ctx, "warm-up", o); err != nil {
		t.Fatal(err)
	}
	rdb.Del(ctx, redislock.DefaultPrefix+"{warm-up}")
	before := usedMemory(t, ctx, rdb)

	var wg sync.WaitGroup
	const workers = 32
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				r := req("order:"+strconv.Itoa(i), lockx.NewOwner(), time.Hour)
				if res, err := b.Acquire(ctx, r); err != nil || !res.Acquired {
					t.Errorf("acquire %d: %+v %v", i, res, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if k := rdb.DBSize(ctx).Val(); k != n {
		t.Fatalf("%d keys, want %d", k, n)
	}
	after := usedMemory(t, ctx, rdb)
	t.Logf("Redis memory per held lock (key %q, 16-byte owner + 8-byte token, PX): %.1f bytes",
		redislock.DefaultPrefix+"{order:N}", float64(after-before)/n)
}

func usedMemory(t *testing.T, ctx context.Context, rdb *redis.Client) int64 {
	t.Helper()
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(l, "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no used_memory in INFO")
	return 0
}
