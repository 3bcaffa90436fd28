package redislock_test

import (
	"context"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/redislock"
)

// The one-caller pair against raw go-redis, in one process. On a shared
// machine the times move with the load; the allocations, the CPU time per
// pair and BenchmarkPairInterleaved's ratio move far less.
// Run: go test -run '^$' -bench 'Pair' -benchmem -count 6 ./lockx/redislock

// rawPair is the raw baseline's pair: SET key owner NX PX, then
// compare-and-delete by script (EVALSHA), with a fresh random owner per
// pair as a lock needs.
func rawPair(rdb *redis.Client, prefix string) func(ctx context.Context, key string) error {
	return func(ctx context.Context, key string) error {
		k, o := prefix+key, string(lockx.NewOwner())
		ok, err := rdb.SetNX(ctx, k, o, 10*time.Second).Result()
		if err != nil || !ok {
			return err
		}
		return rawRelease.Run(ctx, rdb, []string{k}, o).Err()
	}
}

// lockxPair is lockx's pair: Acquire + Release.
func lockxPair(locks *lockx.Client, opts ...lockx.Option) func(ctx context.Context, key string) error {
	return func(ctx context.Context, key string) error {
		l, err := locks.Acquire(ctx, key, opts...)
		if err != nil {
			return err
		}
		return l.Release(ctx)
	}
}

// pairClients returns the benchmark's Redis client and a lockx Client on
// redislock.New's defaults over it.
func pairClients(b *testing.B) (*redis.Client, *lockx.Client) {
	rdb := benchRedis(b)
	locks := lockx.New(redislock.New(rdb, redislock.WithPrefix(testPrefix())))
	b.Cleanup(func() { _ = locks.Close() })
	return rdb, locks
}

// BenchmarkPair runs the raw pair and lockx's on one goroutine, lockx with
// an explicit lease (as lockxbench's uncontended rows) and with the
// watchdog, and reports the CPU time per pair of this process and of the
// Redis server besides the usual figures.
func BenchmarkPair(b *testing.B) {
	rdb, locks := pairClients(b)
	cpu := func(pair func(ctx context.Context, key string) error) func(b *testing.B) {
		return func(b *testing.B) {
			c0, s0 := procCPU(), serverCPU(b, rdb)
			runPairs(b, 1, pair)
			c1, s1 := procCPU(), serverCPU(b, rdb)
			b.ReportMetric(float64(c1-c0)/float64(b.N), "client-cpu-ns/op")
			b.ReportMetric(float64(s1-s0)/float64(b.N), "server-cpu-ns/op")
		}
	}
	b.Run("raw", cpu(rawPair(rdb, testPrefix())))
	b.Run("lease", cpu(lockxPair(locks, lockx.WithLease(time.Minute))))
	b.Run("watchdog", cpu(lockxPair(locks)))
}

// BenchmarkPairInterleaved alternates, on one goroutine, one raw pair, one
// lockx pair (explicit lease) and one pair of the same scripts through the
// redislock Backend alone (no Client: the scripts' floor), and reports the
// mean time of each and lockx's speed relative to the other two: all three
// see the same load, so the ratios hold still where the times do not.
func BenchmarkPairInterleaved(b *testing.B) {
	rdb, locks := pairClients(b)
	be := redislock.New(rdb, redislock.WithPrefix(testPrefix()))
	b.Cleanup(func() { _ = be.Close() })
	backendPair := func(ctx context.Context, key string) error {
		o := lockx.NewOwner()
		if _, err := be.Acquire(ctx, driver.Request{Key: key, Owner: o, Lease: time.Minute, Wait: true}); err != nil {
			return err
		}
		return be.Release(ctx, key, o)
	}
	pairs := []func(ctx context.Context, key string) error{
		rawPair(rdb, testPrefix()), lockxPair(locks, lockx.WithLease(time.Minute)), backendPair,
	}
	ctx := context.Background()
	var took [3]time.Duration
	for b.Loop() {
		for i, pair := range pairs {
			t := time.Now()
			if err := pair(ctx, "k"); err != nil {
				b.Fatal(err)
			}
			took[i] += time.Since(t)
		}
	}
	for i, name := range []string{"raw", "lockx", "backend"} {
		b.ReportMetric(float64(took[i].Nanoseconds())/float64(b.N), name+"-ns/pair")
	}
	b.ReportMetric(float64(took[0])/float64(took[1]), "lockx/raw-speed")
	b.ReportMetric(float64(took[2])/float64(took[1]), "lockx/backend-speed")
}

// procCPU is this process's user + system CPU time so far.
func procCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// serverCPU is the Redis server's user + system CPU time so far.
func serverCPU(b *testing.B, rdb *redis.Client) time.Duration {
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for line := range strings.SplitSeq(info, "\r\n") {
		for _, f := range []string{"used_cpu_sys:", "used_cpu_user:"} {
			if v, ok := strings.CutPrefix(line, f); ok {
				x, _ := strconv.ParseFloat(v, 64)
				total += x
			}
		}
	}
	return time.Duration(total * 1e9)
}
