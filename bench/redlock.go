package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/redislock"
)

// Redlock: lockx's quorum backend against redsync, both on the same five
// independent redis-servers of the Env.
const (
	redlockSection  = "redlock"
	redlockNodes    = 5
	nameQuorum      = "lockx Acquire + Release (redislock.NewQuorum, 5 servers)"
	nameQuorumTry   = "lockx TryAcquire + Release (redislock.NewQuorum, 5 servers)"
	redlockRetry    = "refused tries, key held, 16 goroutines"
	nameRetryRs     = "redsync TryLockContext (1 try)"
	nameRetryQuorum = "lockx TryAcquire (redislock.NewQuorum)"
	retryGoroutines = 16
	mSrvCPU         = "server cpu µs/op"
)

// serversCPU measures the CPU the first n servers used in the window (INFO
// cpu, user + system, summed), in µs per operation.
type serversCPU struct {
	e      *Env
	n      int
	before float64
	ok     bool
}

func (p *serversCPU) begin(ctx context.Context) { p.before, p.ok = p.e.sumServers(ctx, p.n, serverCPU) }

func (p *serversCPU) end(ctx context.Context, s Sample, window time.Duration) {
	after, ok := p.e.sumServers(ctx, p.n, serverCPU)
	if ops := s[mRate] * window.Seconds(); ok && p.ok && ops > 0 {
		s[mSrvCPU] = (after - p.before) * 1e6 / ops
	}
}

// redlockProbes count, over the five servers, round trips, commands and
// server CPU per operation.
func redlockProbes(e *Env) []probe {
	return []probe{e.cmdProbeOn(redlockNodes), &serversCPU{e: e, n: redlockNodes}}
}

// quorumLib builds a lockx Client over redislock.NewQuorum on the Env's
// first five servers, one go-redis client per server, as redsyncLib(5)
// does; opts are per-call options.
func quorumLib(try bool, opts ...lockx.Option) opener {
	return func(ctx context.Context, e *Env, poolSize int) (Locker, error) {
		addrs, err := e.Servers(ctx, redlockNodes)
		if err != nil {
			return nil, err
		}
		rdbs := make([]*redis.Client, len(addrs))
		nodes := make([]redis.UniversalClient, len(addrs))
		for i, a := range addrs {
			rdbs[i] = e.clientOn(a, poolSize)
			nodes[i] = rdbs[i]
		}
		closeClients := func() error {
			var errs []error
			for _, c := range rdbs {
				errs = append(errs, c.Close())
			}
			return errors.Join(errs...)
		}
		return &lockxLocker{c: lockx.New(redislock.NewQuorum(nodes)), opts: opts, try: try, close: closeClients}, nil
	}
}

// redlockLibs are the rows of the uncontended Redlock groups: redsync with
// its defaults (the baseline) and lockx with the watchdog off.
func redlockLibs() []pairLib {
	lease := lockx.WithLease(benchLease)
	return []pairLib{
		{name: nameRedsync5, open: redsyncLib(redlockNodes), quick: true},
		{name: nameQuorum, open: quorumLib(false, lease), quick: true},
		{name: nameQuorumTry, open: quorumLib(true, lease)},
	}
}

func redlockCases() []*Case {
	var cs []*Case
	for _, n := range []int{1, 16, 64} {
		for i, l := range redlockLibs() {
			cs = append(cs, &Case{
				Section: redlockSection, Group: groupGoroutines(n), Name: l.name,
				Baseline: i == 0, Quick: l.quick && n != 16,
				Run: func(ctx context.Context, e *Env, p Params) (Sample, error) {
					return runPairsProbed(ctx, e, p, l.open, n, redlockProbes(e)...)
				},
			})
		}
	}
	cs = append(cs, &Case{
		Section: allocSection, Group: "1 goroutine", Name: nameQuorum,
		Run: func(ctx context.Context, e *Env, p Params) (Sample, error) {
			return runAllocs(ctx, e, pairLib{name: nameQuorum, open: quorumLib(false, lockx.WithLease(benchLease))})
		},
	})
	for i, name := range []string{nameRetryRs, nameRetryQuorum} {
		cs = append(cs, &Case{
			Section: redlockSection, Group: redlockRetry, Name: name, Baseline: i == 0,
			Run: func(ctx context.Context, e *Env, p Params) (Sample, error) {
				return runRefused(ctx, e, p, name == nameRetryQuorum)
			},
		})
	}
	return cs
}

// runRefused measures what a refused try costs: one holder holds a key on
// all five servers, and retryGoroutines goroutines try it once, again and
// again, with one library's single-try call. An operation is one refused
// try; round trips and server commands are summed over the five servers.
func runRefused(ctx context.Context, e *Env, p Params, quorum bool) (Sample, error) {
	const key = "held"
	var try func(ctx context.Context) error
	if quorum {
		lk, err := quorumLib(true)(ctx, e, PoolSize)
		if err != nil {
			return nil, err
		}
		defer lk.Close()
		c := lk.(*lockxLocker).c
		held, err := c.Acquire(ctx, key, lockx.WithLease(benchLease))
		if err != nil {
			return nil, err
		}
		defer held.Release(context.WithoutCancel(ctx))
		try = func(ctx context.Context) error {
			l, err := c.TryAcquire(ctx, key, lockx.WithLease(benchLease))
			if err == nil {
				_ = l.Release(ctx)
				return errors.New("bench: a held key was granted")
			}
			if errors.Is(err, lockx.ErrNotAcquired) {
				return nil
			}
			return err
		}
	} else {
		lk, err := redsyncLib(redlockNodes)(ctx, e, PoolSize)
		if err != nil {
			return nil, err
		}
		defer lk.Close()
		rs := lk.(*redsyncLocker).rs
		held := rs.NewMutex(key, redsync.WithExpiry(benchLease))
		if err := held.LockContext(ctx); err != nil {
			return nil, err
		}
		defer held.UnlockContext(context.WithoutCancel(ctx))
		try = func(ctx context.Context) error {
			m := rs.NewMutex(key)
			err := m.TryLockContext(ctx)
			if err == nil {
				_, _ = m.UnlockContext(ctx)
				return errors.New("bench: a held key was granted")
			}
			var taken *redsync.ErrTaken
			if errors.Is(err, redsync.ErrFailed) || errors.As(err, &taken) {
				return nil
			}
			return fmt.Errorf("bench: redsync try: %w", err)
		}
	}
	return drive(ctx, p, retryGoroutines, func(ctx context.Context, w int, r *recorder) {
		t := time.Now()
		if err := try(ctx); err != nil {
			if ctx.Err() == nil {
				r.fail()
			}
			return
		}
		r.ok(time.Since(t))
	}, redlockProbes(e)...), nil
}
