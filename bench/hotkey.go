package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sync/atomic"
	"time"

	bsm "github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/lockx"
)

// Row names of the contended tables, used by the targets.
const (
	hotSection   = "hotkey"
	hotGroup     = "16 clients"
	nameHotRaw   = "raw SET NX, 1 ms sleep between tries"
	nameHotBsm10 = "bsm/redislock LinearBackoff(10 ms) (common setting; default NoRetry cannot wait)"
	nameHotBsm1  = "bsm/redislock LinearBackoff(1 ms) (best)"
	nameHotRs    = "redsync defaults (32 tries, 50–250 ms random delay)"
	nameHotRs1   = "redsync WithRetryDelay(1 ms) (best)"
	nameHotLockx = "lockx Acquire (defaults)"
	nameHotFair  = "lockx Acquire Fair()"
	// nameHotFloor is the physical limit of a handoff through Redis, with
	// no lock library: one token in a list, taken with BLPOP and given back
	// with LPUSH, so a handoff is the giver's one round trip and the reply
	// the server pushes to the next blocked taker. No lease, no fencing
	// token, no safety: a floor, not a lock.
	nameHotFloor = "floor, no lock: a token passed through a list (BLPOP takes, LPUSH gives back)"
	// nameLocalRueidis is the baseline of the one-process table: one
	// rueidislock Locker shared by the goroutines.
	nameLocalRueidis = "rueidislock, one Locker shared by the 16 goroutines"
	nameLocalLockx   = "lockx Acquire, 16 goroutines on one Client"
	nameLocalFirst   = "lockx Acquire LocalFirst(), 16 goroutines on one Client"
	hotClients       = 16
	localSection     = "localfirst"
	zipfSection      = "zipf"
	zipfKeys         = 1000
	zipfGoroutines   = 64
	// zipfS is the Zipf exponent: with 1,000 keys the most popular key draws
	// about 18 % of the acquisitions, the top ten about 48 %.
	zipfS = 1.1
)

// contendedLib is one row of a contended table.
type contendedLib struct {
	name  string
	open  opener
	quick bool
}

// hotLibs: each peer at its defaults and at its best retry setting, named as
// such; lockx at its defaults and in fair mode.
func hotLibs() []contendedLib {
	return []contendedLib{
		{nameHotRaw, rawLib(time.Millisecond), true},
		{nameHotBsm10, bsmLib(bsm.LinearBackoff(10 * time.Millisecond)), false},
		{nameHotBsm1, bsmLib(bsm.LinearBackoff(time.Millisecond)), true},
		{nameHotRs, redsyncLib(1), false},
		{nameHotRs1, redsyncLib(1, redsync.WithRetryDelay(time.Millisecond)), true},
		{nameHotLockx, lockxRedisLib(false), true},
		{nameHotFair, lockxRedisLib(false, lockx.Fair()), true},
	}
}

func hotKeyCases() []*Case {
	var cs []*Case
	for i, l := range hotLibs() {
		cs = append(cs, &Case{
			Section: hotSection, Group: hotGroup, Name: l.name, Baseline: i == 0, Quick: l.quick,
			Run: func(ctx context.Context, e *Env, p Params) (Sample, error) {
				// One go-redis client and one library client per goroutine, with
				// default pool sizes: 16 independent processes.
				lks, err := openN(hotClients, func() (Locker, error) { return l.open(ctx, e, 0) })
				if err != nil {
					return nil, err
				}
				defer closeAll(lks)
				return runHandoffs(ctx, p, lks, e.cmdProbe()), nil
			},
		})
	}
	return append(cs, &Case{
		Section: hotSection, Group: hotGroup, Name: nameHotFloor, Quick: true,
		Run: func(ctx context.Context, e *Env, p Params) (Sample, error) {
			lks, err := openN(hotClients, func() (Locker, error) {
				rdb, err := e.Client(ctx, 0)
				if err != nil {
					return nil, err
				}
				return &tokenPasser{rdb: rdb}, nil
			})
			if err != nil {
				return nil, err
			}
			defer closeAll(lks)
			rdb := lks[0].(*tokenPasser).rdb
			if err := rdb.Del(ctx, floorList).Err(); err != nil {
				return nil, err
			}
			if err := rdb.LPush(ctx, floorList, "token").Err(); err != nil {
				return nil, err
			}
			return runHandoffs(ctx, p, lks, e.cmdProbe()), nil
		},
	})
}

// floorList holds the one token of the hot-key floor row.
const floorList = "hot:floor"

// tokenPasser is the hot-key floor: the holder of the list's one token
// holds the "lock". Lock blocks in BLPOP in short slices, so that it
// notices its context ending.
type tokenPasser struct{ rdb *redis.Client }

func (t *tokenPasser) Pair(ctx context.Context, key string) error {
	unlock, err := t.Lock(ctx, key)
	if err != nil {
		return err
	}
	return unlock(ctx)
}

func (t *tokenPasser) Lock(ctx context.Context, _ string) (func(context.Context) error, error) {
	for {
		v, err := t.rdb.BLPop(ctx, 50*time.Millisecond, floorList).Result()
		switch {
		case err == nil:
			return func(ctx context.Context) error { return t.rdb.LPush(ctx, floorList, v[1]).Err() }, nil
		case !errors.Is(err, redis.Nil):
			return nil, err
		case ctx.Err() != nil:
			return nil, ctx.Err()
		}
	}
}

func (t *tokenPasser) Close() error { return t.rdb.Close() }

func localFirstCases() []*Case {
	libs := []contendedLib{
		{nameLocalRueidis, rueidisLib(1), false},
		{nameLocalLockx, lockxRedisLib(false), false},
		{nameLocalFirst, lockxRedisLib(false, lockx.LocalFirst()), false},
	}
	var cs []*Case
	for i, l := range libs {
		cs = append(cs, &Case{
			Section: localSection, Group: "16 goroutines, one key", Name: l.name, Baseline: i == 0,
			Run: func(ctx context.Context, e *Env, p Params) (Sample, error) {
				lk, err := l.open(ctx, e, PoolSize)
				if err != nil {
					return nil, err
				}
				defer lk.Close()
				return runHandoffs(ctx, p, shared(lk, hotClients), e.cmdProbe()), nil
			},
		})
	}
	return cs
}

func closeAll(lks []Locker) {
	for _, lk := range lks {
		if lk != nil {
			lk.Close()
		}
	}
}

// openN opens n independent lockers (n processes); if one fails, it closes
// those already open.
func openN(n int, open func() (Locker, error)) ([]Locker, error) {
	lks := make([]Locker, n)
	for i := range lks {
		lk, err := open()
		if err != nil {
			closeAll(lks)
			return nil, err
		}
		lks[i] = lk
	}
	return lks, nil
}

// shared returns n references to one locker: n goroutines of one process
// sharing its client.
func shared(lk Locker, n int) []Locker {
	lks := make([]Locker, n)
	for i := range lks {
		lks[i] = lk
	}
	return lks
}

// runHandoffs has goroutine w loop on one hot key through lks[w]: lock,
// release at once, lock again. A handoff is a grant to a different goroutine
// than the previous holder; its wait runs from the moment that goroutine
// began wanting the lock (its first try, across failed calls) to the grant.
// A call that returns an error (retries exhausted) counts as failed and the
// goroutine tries again. "overlaps" counts grants while another goroutine
// still held the lock: a correctness check, it must be 0.
func runHandoffs(ctx context.Context, p Params, lks []Locker, probes ...probe) Sample {
	const key = "hot"
	var last atomic.Int64
	last.Store(-1)
	var inside atomic.Int32
	var overlaps atomic.Int64
	s := drive(ctx, p, len(lks), func(ctx context.Context, w int, r *recorder) {
		t0 := time.Now()
		var unlock func(context.Context) error
		for {
			u, err := lks[w].Lock(ctx, key)
			if err == nil {
				unlock = u
				break
			}
			if ctx.Err() != nil {
				return
			}
			r.fail()
		}
		if inside.Add(1) > 1 {
			overlaps.Add(1)
		}
		if prev := last.Swap(int64(w)); prev >= 0 && prev != int64(w) {
			r.ok(time.Since(t0))
		}
		inside.Add(-1)
		if err := unlock(context.WithoutCancel(ctx)); err != nil {
			r.fail()
		}
	}, probes...)
	s[mViol] = float64(overlaps.Load())
	return s
}

// --- 1,000 keys × 64 goroutines, Zipf popularity --------------------------

func zipfCases() []*Case {
	libs := []contendedLib{
		{nameHotRaw, rawLib(time.Millisecond), false},
		{nameHotBsm1, bsmLib(bsm.LinearBackoff(time.Millisecond)), false},
		{nameHotRs, redsyncLib(1), false},
		{nameHotRs1, redsyncLib(1, redsync.WithRetryDelay(time.Millisecond)), false},
		{nameHotLockx, lockxRedisLib(false), false},
	}
	var cs []*Case
	for i, l := range libs {
		cs = append(cs, &Case{
			Section: zipfSection, Group: fmt.Sprintf("%d keys × %d goroutines", zipfKeys, zipfGoroutines),
			Name: l.name, Baseline: i == 0,
			Run: func(ctx context.Context, e *Env, p Params) (Sample, error) {
				return runZipf(ctx, e, p, l)
			},
		})
	}
	return cs
}

// runZipf has 64 goroutines of one process (one Locker, pool of 64) lock
// and release keys drawn from a Zipf distribution over 1,000 keys. The
// latency is the acquisition's wait, from the first try to the grant.
func runZipf(ctx context.Context, e *Env, p Params, l contendedLib) (Sample, error) {
	lk, err := l.open(ctx, e, PoolSize)
	if err != nil {
		return nil, err
	}
	defer lk.Close()
	keys := make([]string, zipfKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("z:%d", i)
	}
	zipfs := make([]*rand.Zipf, zipfGoroutines)
	for w := range zipfs {
		zipfs[w] = rand.NewZipf(rand.New(rand.NewSource(int64(w+1))), zipfS, 1, zipfKeys-1)
	}
	return drive(ctx, p, zipfGoroutines, func(ctx context.Context, w int, r *recorder) {
		key := keys[zipfs[w].Uint64()]
		t0 := time.Now()
		unlock, err := lk.Lock(ctx, key)
		if err != nil {
			if ctx.Err() == nil {
				r.fail()
			}
			return
		}
		r.ok(time.Since(t0))
		if err := unlock(context.WithoutCancel(ctx)); err != nil {
			r.fail()
		}
	}, e.cmdProbe()), nil
}
