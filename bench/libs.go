package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"time"

	bsm "github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/lockx/redislock"
)

// Locker is one lock library configured one way, as one process would use
// it. Adapters call each library the way its README does and add nothing.
type Locker interface {
	// Pair acquires key with the library's plain lock call and releases it:
	// the unit of the uncontended cases and of the allocation counts.
	Pair(ctx context.Context, key string) error
	// Lock acquires key, waiting as the library's retry policy says, and
	// returns the release.
	Lock(ctx context.Context, key string) (unlock func(context.Context) error, err error)
	// Close releases what the Locker owns (its clients).
	Close() error
}

// opener builds a Locker, as one process would, with its own go-redis
// client(s) of the given pool size (0: go-redis's default).
type opener func(ctx context.Context, e *Env, poolSize int) (Locker, error)

// errSkip marks a case that cannot run here (a backend not yet in the tree,
// PostgreSQL not reachable); the report lists it with the reason.
var errSkip = errors.New("skipped")

var (
	errNotObtained = errors.New("bench: lock not obtained")
	errNotHeld     = errors.New("bench: lock was not held at release")
)

// benchLease is the lease of raw and bsm/redislock locks (which need one)
// and of lockx where the watchdog is off: long enough that no lock expires
// during a case, including 100,000 locks held for the memory cases.
// redsync keeps its default expiry (8 s) except where locks are held longer.
const benchLease = time.Minute

// --- raw go-redis: the physical limit -------------------------------------

// releaseScript is the canonical compare-and-delete.
var releaseScript = redis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`)

// The least a lock with fencing tokens asks of Redis, as two scripts: the
// grant reads the key's last token (left behind by the last release) and
// writes the owner with the next one, and the release checks the owner and
// leaves the token behind. No queue, no waiter marks, no clock: the floor
// of any fenced lock's pair on this server, against which lockx's own
// scripts (the same two reads and writes, plus the waiters' checks) are
// measured (issue 31).
var (
	fencedAcquireScript = redis.NewScript(`local v = redis.call('GET', KEYS[1])
local prev = 0
if v then
  if #v > 8 then return -1 end
  prev = struct.unpack('>I8', v)
end
redis.call('SET', KEYS[1], ARGV[1] .. struct.pack('>I8', prev + 1), 'PX', ARGV[2])
return prev + 1`)
	fencedReleaseScript = redis.NewScript(`local v = redis.call('GET', KEYS[1])
if v and #v > 8 and string.sub(v, 1, -9) == ARGV[1] then
  redis.call('SET', KEYS[1], string.sub(v, -8), 'PX', ARGV[2])
  return 1
end
return 0`)
)

// fencedTombstone is how long the fenced floor's release leaves the token
// behind: lockx's default tombstone.
const fencedTombstone = 2 * time.Second

// rawLocker is the baseline: SET key token NX PX, then the compare-and-delete
// script (EVALSHA), with a fresh 128-bit random token per acquisition. Lock
// polls every retry. fenced swaps both for the fenced floor's scripts.
type rawLocker struct {
	rdb    *redis.Client
	cmds   rawCmds // rdb, or its autopipeliner
	retry  time.Duration
	fenced bool
}

// rawCmds is what the raw locker sends its commands through.
type rawCmds interface {
	SetNX(ctx context.Context, key string, value any, expiration time.Duration) *redis.BoolCmd
	redis.Scripter
}

func rawLib(retry time.Duration) opener {
	return func(ctx context.Context, e *Env, poolSize int) (Locker, error) {
		rdb, err := e.Client(ctx, poolSize)
		if err != nil {
			return nil, err
		}
		return &rawLocker{rdb: rdb, cmds: rdb, retry: retry}, nil
	}
}

// fencedFloorLib is the raw locker with the fenced floor's scripts.
func fencedFloorLib() opener {
	return func(ctx context.Context, e *Env, poolSize int) (Locker, error) {
		rdb, err := e.Client(ctx, poolSize)
		if err != nil {
			return nil, err
		}
		return &rawLocker{rdb: rdb, cmds: rdb, retry: time.Millisecond, fenced: true}, nil
	}
}

// rawAutoPipelineLib is the raw locker with every command sent through the
// client's autopipeliner (rdb.AutoPipeline(), go-redis's defaults): the
// cheapest lock pair (two server commands) batched the way lockx's
// Backend batches, so the ceiling of any lock built on go-redis's
// batching on this machine.
func rawAutoPipelineLib() opener {
	return func(ctx context.Context, e *Env, poolSize int) (Locker, error) {
		rdb, err := e.Client(ctx, poolSize)
		if err != nil {
			return nil, err
		}
		ap, err := rdb.AutoPipeline()
		if err != nil {
			rdb.Close()
			return nil, err
		}
		return &rawLocker{rdb: rdb, cmds: ap, retry: time.Millisecond}, nil
	}
}

func (r *rawLocker) try(ctx context.Context, key string) (string, error) {
	tok := rand.Text()
	if r.fenced {
		n, err := fencedAcquireScript.Run(ctx, r.cmds, []string{key}, tok, benchLease.Milliseconds()).Int64()
		if err != nil {
			return "", err
		}
		if n < 0 {
			return "", errNotObtained
		}
		return tok, nil
	}
	ok, err := r.cmds.SetNX(ctx, key, tok, benchLease).Result()
	if err != nil {
		return "", err
	}
	if !ok {
		return "", errNotObtained
	}
	return tok, nil
}

func (r *rawLocker) release(ctx context.Context, key, tok string) error {
	var cmd *redis.Cmd
	if r.fenced {
		cmd = fencedReleaseScript.Run(ctx, r.cmds, []string{key}, tok, fencedTombstone.Milliseconds())
	} else {
		cmd = releaseScript.Run(ctx, r.cmds, []string{key}, tok)
	}
	n, err := cmd.Int64()
	if err != nil {
		return err
	}
	if n != 1 {
		return errNotHeld
	}
	return nil
}

func (r *rawLocker) Pair(ctx context.Context, key string) error {
	tok, err := r.try(ctx, key)
	if err != nil {
		return err
	}
	return r.release(ctx, key, tok)
}

func (r *rawLocker) Lock(ctx context.Context, key string) (func(context.Context) error, error) {
	for {
		tok, err := r.try(ctx, key)
		if err == nil {
			return func(ctx context.Context) error { return r.release(ctx, key, tok) }, nil
		}
		if !errors.Is(err, errNotObtained) {
			return nil, err
		}
		t := time.NewTimer(r.retry)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
}

func (r *rawLocker) Close() error { return r.rdb.Close() }

// --- github.com/bsm/redislock ----------------------------------------------

type bsmLocker struct {
	rdb *redis.Client
	c   *bsm.Client
	opt *bsm.Options // nil: the library's default, no retry
}

func bsmLib(retry bsm.RetryStrategy) opener {
	return func(ctx context.Context, e *Env, poolSize int) (Locker, error) {
		rdb, err := e.Client(ctx, poolSize)
		if err != nil {
			return nil, err
		}
		var opt *bsm.Options
		if retry != nil {
			opt = &bsm.Options{RetryStrategy: retry}
		}
		return &bsmLocker{rdb: rdb, c: bsm.New(rdb), opt: opt}, nil
	}
}

func (b *bsmLocker) Pair(ctx context.Context, key string) error {
	l, err := b.c.Obtain(ctx, key, benchLease, b.opt)
	if err != nil {
		return err
	}
	return l.Release(ctx)
}

func (b *bsmLocker) Lock(ctx context.Context, key string) (func(context.Context) error, error) {
	l, err := b.c.Obtain(ctx, key, benchLease, b.opt)
	if err != nil {
		return nil, err
	}
	return l.Release, nil
}

func (b *bsmLocker) Close() error { return b.rdb.Close() }

// --- github.com/go-redsync/redsync/v4 --------------------------------------

// redsyncLocker uses one mutex per call, as redsync's README does.
type redsyncLocker struct {
	rdbs []*redis.Client
	rs   *redsync.Redsync
	opts []redsync.Option
}

func redsyncLib(servers int, opts ...redsync.Option) opener {
	return func(ctx context.Context, e *Env, poolSize int) (Locker, error) {
		addrs, err := e.Servers(ctx, servers)
		if err != nil {
			return nil, err
		}
		l := &redsyncLocker{opts: opts}
		pools := make([]redsyncredis.Pool, 0, servers)
		for _, a := range addrs {
			rdb := e.clientOn(a, poolSize)
			l.rdbs = append(l.rdbs, rdb)
			pools = append(pools, goredis.NewPool(rdb))
		}
		l.rs = redsync.New(pools...)
		return l, nil
	}
}

func (r *redsyncLocker) Pair(ctx context.Context, key string) error {
	m := r.rs.NewMutex(key, r.opts...)
	if err := m.LockContext(ctx); err != nil {
		return err
	}
	ok, err := m.UnlockContext(ctx)
	if err == nil && !ok {
		err = errNotHeld
	}
	return err
}

func (r *redsyncLocker) Lock(ctx context.Context, key string) (func(context.Context) error, error) {
	m := r.rs.NewMutex(key, r.opts...)
	if err := m.LockContext(ctx); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		ok, err := m.UnlockContext(ctx)
		if err == nil && !ok {
			err = errNotHeld
		}
		return err
	}, nil
}

func (r *redsyncLocker) Close() error {
	var errs []error
	for _, c := range r.rdbs {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// --- lockx -------------------------------------------------------------------

// lockxLocker is a lockx Client. Pair uses Acquire (the call users copy),
// or TryAcquire when try is set.
type lockxLocker struct {
	c     *lockx.Client
	opts  []lockx.Option
	try   bool
	close func() error // the go-redis client, if any
}

// lockxRedisLib builds a lockx Client over the Redis backend; opts are
// per-call options.
func lockxRedisLib(try bool, opts ...lockx.Option) opener {
	return lockxRedisLibWith(try, nil, opts...)
}

// lockxRedisLibWith is lockxRedisLib with redislock options.
func lockxRedisLibWith(try bool, bopts []redislock.Option, opts ...lockx.Option) opener {
	return func(ctx context.Context, e *Env, poolSize int) (Locker, error) {
		b, rdb, err := openRedisBackend(ctx, e, poolSize, bopts...)
		if err != nil {
			return nil, err
		}
		return &lockxLocker{c: lockx.New(b), opts: opts, try: try, close: rdb.Close}, nil
	}
}

// lockxMemLib builds a lockx Client over the in-process backend.
func lockxMemLib(opts ...lockx.Option) opener {
	return func(ctx context.Context, e *Env, poolSize int) (Locker, error) {
		return &lockxLocker{c: lockx.New(memlock.New()), opts: opts}, nil
	}
}

func (l *lockxLocker) acquire(ctx context.Context, key string) (*lockx.Lock, error) {
	if l.try {
		return l.c.TryAcquire(ctx, key, l.opts...)
	}
	return l.c.Acquire(ctx, key, l.opts...)
}

func (l *lockxLocker) Pair(ctx context.Context, key string) error {
	lk, err := l.acquire(ctx, key)
	if err != nil {
		return err
	}
	return lk.Release(ctx)
}

func (l *lockxLocker) Lock(ctx context.Context, key string) (func(context.Context) error, error) {
	lk, err := l.c.Acquire(ctx, key, l.opts...)
	if err != nil {
		return nil, err
	}
	return lk.Release, nil
}

func (l *lockxLocker) Close() error {
	err := l.c.Close()
	if l.close != nil {
		err = errors.Join(err, l.close())
	}
	return err
}
