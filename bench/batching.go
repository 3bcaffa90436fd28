package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/redislock"
)

// Batching (issue 17): lockx's coalescing of concurrent calls against the
// peer that pipelines everything (rueidislock), lockx with batching off, and
// raw go-redis; then paired latencies, measured alternately in one goroutine
// so that load on the machine falls on both sides alike.
const (
	batchSection      = "batching"
	pairedSection     = "paired"
	nameRueidis       = "rueidislock WithContext + cancel (1 key per lock, KeyMajority 1)"
	nameRawAP         = "raw go-redis SET NX + Lua compare-and-delete through rdb.AutoPipeline() (ceiling of go-redis batching)"
	nameLockxBatched  = "lockx Acquire + Release, batched (default)"
	nameLockxUnbatch  = "lockx Acquire + Release, WithAutoPipeline(false)"
	nameLockxBackend  = "lockx redislock Backend alone, batched: its Acquire + Release without the Client (the scripts' floor)"
	namePairedBatch   = "Acquire + Release: batched (default) vs WithAutoPipeline(false)"
	namePairedMany    = "AcquireMany of 10 keys (one script) vs Acquire of 1 key; acquire only"
	namePairedManySeq = "AcquireMany of 10 keys key by key (no ManyAcquirer) vs Acquire of 1 key; acquire only"
	namePairedBackend = "redislock Backend alone: its AcquireMany of 10 keys vs its Acquire of 1 key (no Client); acquire only"
	namePairedFloor   = "floor, no lockx: one Lua script taking 10 keys (MGET, then SET … PX each) vs the same script on 1 key; acquire only"
	manyKeys          = 10
	settle            = 200 * time.Microsecond
	// Paired metrics: median µs per operation of the baseline side (a) and
	// of the measured side (b) (with " mean" appended: the means), and the
	// ratio of the medians, b/a.
	mPairA     = "a µs"
	mPairB     = "b µs"
	mPairRatio = "b/a"
)

// batchGoroutines are the goroutine counts of the batching table: the
// issue's 1 and 64.
var batchGoroutines = []int{1, 64}

func batchingCases() []*Case {
	lease := lockx.WithLease(benchLease)
	libs := []pairLib{
		{name: nameRaw, open: rawLib(time.Millisecond), remote: true, quick: true},
		{name: nameRueidis, open: rueidisLib(1), quick: true},
		{name: nameRawAP, open: rawAutoPipelineLib(), remote: true},
		{name: nameLockxBatched, open: lockxRedisLib(false, lease), remote: true, quick: true},
		{name: nameLockxUnbatch, open: lockxRedisLibWith(false, []redislock.Option{redislock.WithAutoPipeline(false)}, lease), remote: true},
		{name: nameLockxBackend, open: redisBackendLib(), remote: true},
	}
	var cs []*Case
	for _, n := range batchGoroutines {
		for i, l := range libs {
			cs = append(cs, &Case{
				Section: batchSection, Group: groupGoroutines(n), Name: l.name, Baseline: i == 0,
				Quick: l.quick,
				Run: func(ctx context.Context, e *Env, p Params) (Sample, error) {
					return runPairs(ctx, e, p, l, n)
				},
			})
		}
	}
	paired := []struct {
		name  string
		run   func(ctx context.Context, e *Env, p Params) (Sample, error)
		quick bool
	}{
		{namePairedBatch, runPairedBatching, true},
		{namePairedMany, func(ctx context.Context, e *Env, p Params) (Sample, error) { return runPairedMany(ctx, e, p, false) }, true},
		{namePairedManySeq, func(ctx context.Context, e *Env, p Params) (Sample, error) { return runPairedMany(ctx, e, p, true) }, false},
		{namePairedBackend, runPairedManyBackend, true},
		{namePairedFloor, runPairedFloor, true},
	}
	for _, pc := range paired {
		cs = append(cs, &Case{Section: pairedSection, Group: "1 goroutine", Name: pc.name, Quick: pc.quick, Run: pc.run})
	}
	return cs
}

// --- github.com/redis/rueidis/rueidislock ---------------------------------

// rueidisLocker is rueidislock as its README uses it: a lock is the context
// WithContext returns, released by its cancel (which waits for the delete).
// It has its own client (rueidis pipelines every concurrent command over
// one connection) and extends every lock in the background, as it always
// does; its round trips do not pass the go-redis hook and are not counted.
type rueidisLocker struct{ l rueidislock.Locker }

func rueidisLib(majority int32) opener {
	return func(ctx context.Context, e *Env, poolSize int) (Locker, error) {
		addr, err := e.Addr(ctx)
		if err != nil {
			return nil, err
		}
		l, err := rueidislock.NewLocker(rueidislock.LockerOption{
			ClientOption: rueidis.ClientOption{InitAddress: []string{addr}},
			KeyMajority:  majority,
		})
		if err != nil {
			return nil, err
		}
		return &rueidisLocker{l: l}, nil
	}
}

func (r *rueidisLocker) Pair(ctx context.Context, key string) error {
	_, cancel, err := r.l.WithContext(ctx, key)
	if err != nil {
		return err
	}
	cancel()
	return nil
}

func (r *rueidisLocker) Lock(ctx context.Context, key string) (func(context.Context) error, error) {
	_, cancel, err := r.l.WithContext(ctx, key)
	if err != nil {
		return nil, err
	}
	return func(context.Context) error { cancel(); return nil }, nil
}

func (r *rueidisLocker) Close() error { r.l.Close(); return nil }

// backendLocker drives a redislock Backend directly, without a Client: a
// fresh owner per pair, one plain attempt, then the release. It shows what
// the scripts and the batcher cost on their own, so the Client's share of
// the Client rows is the difference.
type backendLocker struct {
	b   driver.Backend
	rdb *redis.Client
}

func redisBackendLib() opener {
	return func(ctx context.Context, e *Env, poolSize int) (Locker, error) {
		b, rdb, err := openRedisBackend(ctx, e, poolSize)
		if err != nil {
			return nil, err
		}
		return &backendLocker{b: b, rdb: rdb}, nil
	}
}

func (l *backendLocker) Pair(ctx context.Context, key string) error {
	u, err := l.Lock(ctx, key)
	if err != nil {
		return err
	}
	return u(ctx)
}

// Lock makes one attempt: a key held by another owner is an error.
func (l *backendLocker) Lock(ctx context.Context, key string) (func(context.Context) error, error) {
	o := lockx.NewOwner()
	res, err := l.b.Acquire(ctx, driver.Request{Key: key, Owner: o, Lease: benchLease})
	if err != nil {
		return nil, err
	}
	if !res.Acquired {
		return nil, lockx.ErrNotAcquired
	}
	return func(ctx context.Context) error { return l.b.Release(ctx, key, o) }, nil
}

func (l *backendLocker) Close() error {
	return errors.Join(l.b.Close(), l.rdb.Close())
}

// noMany hides every capability of a Backend but the Backend methods, so
// AcquireMany takes the keys one by one.
type noMany struct{ driver.Backend }

// --- paired latencies --------------------------------------------------------

// runPaired runs a then b alternately in one goroutine (each timed by the
// function itself, which returns the time to count) and reports each
// side's median and mean latency and the ratio of the medians (b/a), so
// the comparison is immune to the machine's load moving between two cases,
// and the median to the preemptions a loaded machine adds to a few calls.
func runPaired(ctx context.Context, p Params, a, b func(ctx context.Context) (time.Duration, error)) (Sample, error) {
	one := func(f func(context.Context) (time.Duration, error)) func(context.Context, int) (time.Duration, error) {
		return func(ctx context.Context, _ int) (time.Duration, error) { return f(ctx) }
	}
	return runPairedN(ctx, p, 1, one(a), one(b))
}

// runPairedN is runPaired with n goroutines, each running a then b
// alternately (w is the goroutine's index).
func runPairedN(ctx context.Context, p Params, n int, a, b func(ctx context.Context, w int) (time.Duration, error)) (Sample, error) {
	lat := make([][2][]time.Duration, n)
	var mu sync.Mutex
	var first error
	s := drive(ctx, p, n, func(ctx context.Context, w int, r *recorder) {
		t := time.Now()
		var d [2]time.Duration
		for side, f := range [2]func(context.Context, int) (time.Duration, error){a, b} {
			var err error
			if d[side], err = f(ctx, w); err != nil {
				if ctx.Err() == nil {
					r.fail()
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
				return
			}
		}
		if r.open.Load() {
			lat[w][0], lat[w][1] = append(lat[w][0], d[0]), append(lat[w][1], d[1])
		}
		r.ok(time.Since(t))
	})
	var all [2][]time.Duration
	for _, l := range lat {
		all[0], all[1] = append(all[0], l[0]...), append(all[1], l[1]...)
	}
	if len(all[0]) == 0 {
		return nil, fmt.Errorf("bench: paired case made no measurement: %v", first)
	}
	out := Sample{mFails: s[mFails]}
	for side, key := range [2]string{mPairA, mPairB} {
		v := all[side]
		slices.Sort(v)
		var sum time.Duration
		for _, d := range v {
			sum += d
		}
		out[key] = float64(v[len(v)/2].Nanoseconds()) / 1e3
		out[key+" mean"] = float64(sum.Nanoseconds()) / 1e3 / float64(len(v))
	}
	out[mPairRatio] = out[mPairB] / out[mPairA]
	return out, nil
}

// pairOp times one acquire + release pair of lk.
func pairOp(lk Locker, key string) func(ctx context.Context) (time.Duration, error) {
	return func(ctx context.Context) (time.Duration, error) {
		t := time.Now()
		err := lk.Pair(ctx, key)
		return time.Since(t), err
	}
}

// runPairedBatching: the same pair through a batched and an unbatched
// Backend on one go-redis client, alternately: what batching costs a lone
// caller.
func runPairedBatching(ctx context.Context, e *Env, p Params) (Sample, error) {
	rdb, err := e.Client(ctx, PoolSize)
	if err != nil {
		return nil, err
	}
	defer rdb.Close()
	lease := lockx.WithLease(benchLease)
	unbatched := &lockxLocker{c: lockx.New(redislock.New(rdb, redislock.WithAutoPipeline(false))), opts: []lockx.Option{lease}}
	batched := &lockxLocker{c: lockx.New(redislock.New(rdb)), opts: []lockx.Option{lease}}
	defer unbatched.Close()
	defer batched.Close()
	return runPaired(ctx, p, pairOp(unbatched, "p:u"), pairOp(batched, "p:b"))
}

// runPairedMany: Acquire of one key against AcquireMany of manyKeys keys on
// the same Client (each released after it is timed), alternately. With seq
// the backend hides its ManyAcquirer, so AcquireMany goes key by key.
func runPairedMany(ctx context.Context, e *Env, p Params, seq bool) (Sample, error) {
	rdb, err := e.Client(ctx, PoolSize)
	if err != nil {
		return nil, err
	}
	defer rdb.Close()
	var b driver.Backend = redislock.New(rdb)
	if seq {
		b = noMany{b}
	}
	c := lockx.New(b, lockx.WithLease(benchLease))
	defer c.Close()
	keys := manyKeyNames("m")
	one := timedAcquire(func(ctx context.Context) (func(context.Context) error, error) {
		l, err := c.Acquire(ctx, "s:0")
		if err != nil {
			return nil, err
		}
		return l.Release, nil
	})
	many := timedAcquire(func(ctx context.Context) (func(context.Context) error, error) {
		s, err := c.AcquireMany(ctx, keys)
		if err != nil {
			return nil, err
		}
		return s.Release, nil
	})
	return runPaired(ctx, p, one, many)
}

// manyKeyNames is the manyKeys keys of a paired case's set: prefix:0 ….
func manyKeyNames(prefix string) []string {
	keys := make([]string, manyKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s:%d", prefix, i)
	}
	return keys
}

// runPairedManyBackend: runPairedMany's two sides on the redislock Backend
// itself, without the Client (no holds, no lease timers), so that with
// runPairedMany and runPairedFloor the ratio splits into the Client's share,
// the scripts' and Redis's.
func runPairedManyBackend(ctx context.Context, e *Env, p Params) (Sample, error) {
	rdb, err := e.Client(ctx, PoolSize)
	if err != nil {
		return nil, err
	}
	defer rdb.Close()
	b := redislock.New(rdb)
	defer b.Close()
	keys := manyKeyNames("bm")
	reqs := make([]driver.Request, manyKeys)
	single := &backendLocker{b: b}
	one := timedAcquire(func(ctx context.Context) (func(context.Context) error, error) {
		return single.Lock(ctx, "bs:0")
	})
	many := timedAcquire(func(ctx context.Context) (func(context.Context) error, error) {
		o := lockx.NewOwner()
		for i, k := range keys {
			reqs[i] = driver.Request{Key: k, Owner: o, Lease: benchLease}
		}
		res, err := b.AcquireMany(ctx, reqs)
		for i := 0; err == nil && i < len(res); i++ {
			if !res[i].Acquired {
				err = lockx.ErrNotAcquired
			}
		}
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context) error { return errors.Join(b.ReleaseMany(ctx, keys, o)...) }, nil
	})
	return runPaired(ctx, p, one, many)
}

// floorLock is the least an all-or-nothing lock over several keys does on
// Redis 7.0, which has no command that writes several keys with a TTL each:
// one script that reads every key and, if all are free, sets each with its
// lease. No token, no queue, no reentrancy. floorUnlock deletes the keys
// the owner holds.
var (
	floorLock = redis.NewScript(`local v = redis.call('MGET', unpack(KEYS))
for i = 1, #KEYS do if v[i] then return 0 end end
for i = 1, #KEYS do redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2]) end
return 1`)
	floorUnlock = redis.NewScript(`for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[1] then redis.call('DEL', KEYS[i]) end
end
return 1`)
)

// runPairedFloor: floorLock on one key against floorLock on manyKeys keys,
// alternately, timed and paused as runPairedMany's sides are — the ratio of
// the per-key work Redis itself does, with no lockx code on either side.
func runPairedFloor(ctx context.Context, e *Env, p Params) (Sample, error) {
	rdb, err := e.Client(ctx, PoolSize)
	if err != nil {
		return nil, err
	}
	defer rdb.Close()
	lease := benchLease.Milliseconds()
	keys := manyKeyNames("floor:m")
	side := func(keys []string) func(ctx context.Context) (time.Duration, error) {
		return timedAcquire(func(ctx context.Context) (func(context.Context) error, error) {
			owner := rand.Text()
			n, err := floorLock.Run(ctx, rdb, keys, owner, lease).Int()
			if err == nil && n != 1 {
				err = errors.New("bench: floor lock refused")
			}
			if err != nil {
				return nil, err
			}
			return func(ctx context.Context) error { return floorUnlock.Run(ctx, rdb, keys, owner).Err() }, nil
		})
	}
	return runPaired(ctx, p, side([]string{"floor:s:0"}), side(keys))
}

// timedAcquire times acquire, then releases what it took and pauses for
// settle (on both sides of a pair alike), so that what a release leaves
// running (the goroutines of a set's concurrent releases, with a Backend
// that is no ManyReleaser) has ended before the next timed acquire: the
// comparison is of acquires on a quiet client.
func timedAcquire(acquire func(ctx context.Context) (func(context.Context) error, error)) func(ctx context.Context) (time.Duration, error) {
	return func(ctx context.Context) (time.Duration, error) {
		t := time.Now()
		release, err := acquire(ctx)
		d := time.Since(t)
		if err != nil {
			return 0, err
		}
		err = release(ctx)
		time.Sleep(settle)
		return d, err
	}
}
