package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redsync/redsync/v4"

	"github.com/lockx-go/lockx/lockx"
)

// Sections and row names of the memory, held-lock and watchdog tables.
const (
	memSection      = "memory"
	memLocks        = 100_000
	heldSection     = "held"
	watchdogSection = "watchdog"
	watchdogLocks   = 10_000
	// watchdogLease is the lease the watchdog renews in the overhead case:
	// renewal every lease/3 = 1 s, so every window sees whole renewal rounds.
	// At the default 30 s lease the same locks cost a tenth of the rate.
	watchdogLease = 3 * time.Second
	nameMemLockx  = "lockx (redislock), WithLease"
	// nameMemRawRenamed is the floor of lockx's memory per lock: a bare
	// SET … PX under the key name lockx gives the lock.
	nameMemRawRenamed = "raw SET NX PX, key named as lockx names it (lockx:{order:N})"
	holdWorkers       = 64
)

// heldCounts are the held-lock sizes of the scaling plot.
var heldCounts = []int{1, 10, 100, 1_000, 10_000, 100_000}

// hold acquires keys prefix0 … prefix(n-1) through lk with 64 goroutines
// and returns their releases.
func hold(ctx context.Context, lk Locker, prefix string, n int) ([]func(context.Context) error, error) {
	unlocks := make([]func(context.Context) error, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, holdWorkers)
	for w := range holdWorkers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				u, err := lk.Lock(ctx, fmt.Sprintf("%s%d", prefix, i))
				if err != nil {
					errs[w] = err
					return
				}
				unlocks[i] = u
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			releaseAll(unlocks)
			return nil, fmt.Errorf("bench: holding %d locks: %w", n, err)
		}
	}
	return unlocks, ctx.Err()
}

// warmConns opens the connections a Locker will use while holding locks
// (pool, subscription), so that Redis's per-connection memory is in the
// "before" reading and not counted per lock.
func warmConns(ctx context.Context, lk Locker) error {
	unlocks, err := hold(ctx, lk, "warm:", 4*holdWorkers)
	releaseAll(unlocks)
	return err
}

// releaseAll releases every held lock with 64 goroutines.
func releaseAll(unlocks []func(context.Context) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	ctx := context.Background()
	for range holdWorkers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(unlocks) {
					return
				}
				if u := unlocks[i]; u != nil {
					_ = u(ctx)
				}
			}
		})
	}
	wg.Wait()
}

// --- Redis memory per held lock --------------------------------------------

func memoryCases() []*Case {
	libs := []contendedLib{
		{"raw SET NX PX (one string key)", rawLib(time.Millisecond), false},
		{nameMemRawRenamed, renamed(rawLib(time.Millisecond), "lockx:{", "}"), false},
		{"bsm/redislock", bsmLib(nil), false},
		{"redsync (expiry 1 min)", redsyncLib(1, redsync.WithExpiry(benchLease)), false},
		{nameMemLockx, lockxRedisLib(false, lockx.WithLease(benchLease)), true},
	}
	var cs []*Case
	for i, l := range libs {
		cs = append(cs, &Case{
			Section: memSection, Group: fmt.Sprintf("%d held locks", memLocks), Name: l.name,
			Baseline: i == 0, Quick: l.quick, Once: true,
			Run: func(ctx context.Context, e *Env, p Params) (Sample, error) {
				n := memLocks
				if p.Quick {
					n = 10_000
				}
				lk, err := l.open(ctx, e, PoolSize)
				if err != nil {
					return nil, err
				}
				defer lk.Close()
				return measureMemory(ctx, e, lk, n)
			},
		})
	}
	return cs
}

// measureMemory holds n locks (keys order:0 …) and reports how much more
// data memory (usedMemory) Redis uses with them than with an empty keyspace,
// per lock: everything the library keeps in Redis per lock (value, fence
// state, expiry entry, hash-table buckets), nothing of the client. The
// empty reading is taken after the locks are released and the keyspace
// flushed, with the same connections open: a reading taken before the
// hold, after a flush, came out about 2 MB high for the peers' 64-connection
// pools (INFO counted memory jemalloc no longer held) and not for lockx,
// which would have charged lockx about 20 B per lock that a bare SET pays
// too.
func measureMemory(ctx context.Context, e *Env, lk Locker, n int) (Sample, error) {
	admin := e.Admin(0)
	if err := warmConns(ctx, lk); err != nil {
		return nil, err
	}
	if err := emptyKeyspace(ctx, admin); err != nil {
		return nil, err
	}
	unlocks, err := hold(ctx, lk, "order:", n)
	if err != nil {
		return nil, err
	}
	held, err := usedMemory(ctx, admin)
	keys, _ := admin.DBSize(ctx).Result()
	releaseAll(unlocks)
	if err != nil {
		return nil, err
	}
	if err := emptyKeyspace(ctx, admin); err != nil {
		return nil, err
	}
	empty, err := usedMemory(ctx, admin)
	if err != nil {
		return nil, err
	}
	return Sample{
		"bytes/lock": float64(held-empty) / float64(n),
		"keys/lock":  float64(keys) / float64(n),
	}, nil
}

// renamed wraps an opener so that its Locker sees every key as pre+key+post.
func renamed(open opener, pre, post string) opener {
	return func(ctx context.Context, e *Env, poolSize int) (Locker, error) {
		lk, err := open(ctx, e, poolSize)
		if err != nil {
			return nil, err
		}
		return renamedLocker{lk, pre, post}, nil
	}
}

type renamedLocker struct {
	Locker
	pre, post string
}

func (r renamedLocker) Pair(ctx context.Context, key string) error {
	return r.Locker.Pair(ctx, r.pre+key+r.post)
}

func (r renamedLocker) Lock(ctx context.Context, key string) (func(context.Context) error, error) {
	return r.Locker.Lock(ctx, r.pre+key+r.post)
}

// --- scaling with the number of held locks ---------------------------------

func heldCases() []*Case {
	libs := []pairLib{
		{name: nameRaw, open: rawLib(time.Millisecond), remote: true},
		{name: nameLockx, open: lockxRedisLib(false, lockx.WithLease(benchLease)), remote: true},
	}
	var cs []*Case
	for _, n := range heldCounts {
		for i, l := range libs {
			cs = append(cs, &Case{
				Section: heldSection, Group: fmt.Sprintf("%d held", n), Name: l.name, Baseline: i == 0,
				Run: func(ctx context.Context, e *Env, p Params) (Sample, error) {
					return runHeld(ctx, e, p, l, n)
				},
			})
		}
	}
	return cs
}

// runHeld holds n locks through one Locker (watchdog off), then measures
// uncontended pairs at 16 goroutines through the same Locker: how the cost
// of a lock grows with the locks already held, in Redis and in the client.
func runHeld(ctx context.Context, e *Env, p Params, l pairLib, n int) (Sample, error) {
	lk, err := l.open(ctx, e, PoolSize)
	if err != nil {
		return nil, err
	}
	defer lk.Close()
	if err := warmConns(ctx, lk); err != nil {
		return nil, err
	}
	if err := emptyKeyspace(ctx, e.Admin(0)); err != nil {
		return nil, err
	}
	before, err := usedMemory(ctx, e.Admin(0))
	if err != nil {
		return nil, err
	}
	unlocks, err := hold(ctx, lk, "h:", n)
	if err != nil {
		return nil, err
	}
	defer releaseAll(unlocks)
	after, err := usedMemory(ctx, e.Admin(0))
	if err != nil {
		return nil, err
	}
	const goroutines = 16
	keys := make([]string, goroutines)
	for i := range keys {
		keys[i] = fmt.Sprintf("u:%d", i)
	}
	s := drive(ctx, p, goroutines, func(ctx context.Context, w int, r *recorder) {
		t := time.Now()
		if err := lk.Pair(ctx, keys[w]); err != nil {
			if ctx.Err() == nil {
				r.fail()
			}
			return
		}
		r.ok(time.Since(t))
	}, e.cmdProbe())
	s["held"] = float64(n)
	if n >= 1000 { // below, allocator noise outweighs the locks
		s["bytes/lock"] = float64(after-before) / float64(n)
	}
	return s, nil
}

// --- watchdog overhead -------------------------------------------------------

func watchdogCases() []*Case {
	libs := []struct {
		name string
		opt  lockx.Option
		rate float64 // renewals per second the watchdog owes
	}{
		{"lockx, 10,000 locks with WithLease (no watchdog)", lockx.WithLease(benchLease), 0},
		{fmt.Sprintf("lockx, 10,000 locks with WithWatchdog(%v)", watchdogLease), lockx.WithWatchdog(watchdogLease),
			watchdogLocks / (watchdogLease / 3).Seconds()},
	}
	var cs []*Case
	for i, l := range libs {
		cs = append(cs, &Case{
			Section: watchdogSection, Group: fmt.Sprintf("%d held locks", watchdogLocks), Name: l.name, Baseline: i == 0,
			Run: func(ctx context.Context, e *Env, p Params) (Sample, error) {
				return runWatchdog(ctx, e, p, l.opt, l.rate)
			},
		})
	}
	return cs
}

// runWatchdog holds 10,000 locks through one lockx Client and measures, in
// an idle window, the Redis commands per second (INFO commandstats), this
// process's CPU (getrusage) and the server's CPU (INFO cpu). It also counts
// locks lost during the window: the watchdog must lose none.
func runWatchdog(ctx context.Context, e *Env, p Params, opt lockx.Option, rate float64) (Sample, error) {
	b, rdb, err := openRedisBackend(ctx, e, PoolSize)
	if err != nil {
		return nil, err
	}
	defer rdb.Close()
	c := lockx.New(b, opt)
	defer c.Close()
	locks := make([]*lockx.Lock, watchdogLocks)
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	for range holdWorkers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(locks) {
					return
				}
				l, err := c.Acquire(ctx, fmt.Sprintf("w:%d", i))
				if err != nil {
					failed.Store(err)
					return
				}
				locks[i] = l
			}
		})
	}
	wg.Wait()
	unlocks := make([]func(context.Context) error, 0, len(locks))
	for _, l := range locks {
		if l != nil {
			unlocks = append(unlocks, l.Release)
		}
	}
	defer releaseAll(unlocks)
	if err, _ := failed.Load().(error); err != nil {
		return nil, err
	}
	// Let the first renewal round start inside the warm-up.
	p.Warmup = max(p.Warmup, watchdogLease/3)
	s := drive(ctx, p, 0, nil, e.cmdProbe(), &cpuProbe{rdb: e.Admin(0)})
	lost := 0
	for _, l := range locks {
		select {
		case <-l.Lost():
			lost++
		default:
		}
	}
	s["renewals/s owed"] = rate
	s["lost"] = float64(lost)
	delete(s, mRate)
	delete(s, mCmds)
	return s, nil
}
