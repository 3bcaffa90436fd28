package bench

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/pglock"
)

// Sections and row names of the PostgreSQL tables.
const (
	pgSection        = "pg"
	pgHotSection     = "pghot"
	namePGRaw        = "raw pg_try_advisory_lock + pg_advisory_unlock, pinned conns"
	namePGLockx      = "lockx Acquire + Release (pglock)"
	namePGHotRaw     = "raw pg_try_advisory_lock, 1 ms sleep between tries"
	namePGHotBlock   = "raw blocking pg_advisory_lock (PostgreSQL's own queue)"
	namePGHotToken   = "raw blocking pg_advisory_lock + nextval, asynchronous commit (a fencing token per grant, nothing else)"
	pgTokenSeq       = "lockxbench_fence" // the token row's sequence, in the bench database's search path
	namePGHotLockx   = "lockx Acquire (pglock, defaults)"
	namePGHotFair    = "lockx Acquire Fair() (pglock)"
	namePGHotDefPool = "lockx Acquire (pglock, defaults, pgxpool's default MaxConns)"
	namePGHotRowNow  = "lockx Acquire (pglock, holder row written in the grant: WithPublishDelay(0))"
	pgKeyNamespace   = "lockxbench:" // advisory keys are hashed from this and the key, away from other users of the database
	pgClientConns    = 6             // pool of each independent lockx client in the hot-key case: pglock's 2 holder sessions + 1 wait session (at most half the pool) + its listener + 2 spare
	pgUncontendedNs  = 32
)

// pgKey maps a benchmark key to an advisory-lock key.
func pgKey(key string) int64 {
	h := fnv.New64a()
	h.Write([]byte(pgKeyNamespace + key))
	return int64(h.Sum64())
}

// pgRawLocker is one pinned connection using session advisory locks
// directly. blocking uses pg_advisory_lock (PostgreSQL queues the waiter);
// otherwise Lock polls pg_try_advisory_lock every retry. With token a
// blocking grant also draws a fencing token from a sequence in the same
// statement, as the least a lock with durable tokens must do.
type pgRawLocker struct {
	conn     *pgxpool.Conn
	blocking bool
	token    bool
	retry    time.Duration
}

func (l *pgRawLocker) try(ctx context.Context, k int64) (bool, error) {
	var ok bool
	err := l.conn.QueryRow(ctx, "select pg_try_advisory_lock($1)", k).Scan(&ok)
	return ok, err
}

func (l *pgRawLocker) unlock(ctx context.Context, k int64) error {
	var ok bool
	if err := l.conn.QueryRow(ctx, "select pg_advisory_unlock($1)", k).Scan(&ok); err != nil {
		return err
	}
	if !ok {
		return errNotHeld
	}
	return nil
}

func (l *pgRawLocker) Pair(ctx context.Context, key string) error {
	k := pgKey(key)
	ok, err := l.try(ctx, k)
	if err != nil {
		return err
	}
	if !ok {
		return errNotObtained
	}
	return l.unlock(ctx, k)
}

func (l *pgRawLocker) Lock(ctx context.Context, key string) (func(context.Context) error, error) {
	k := pgKey(key)
	release := func(ctx context.Context) error { return l.unlock(ctx, k) }
	if l.blocking {
		// A cancelled wait makes pgx close the connection; the case ends then.
		q := "select pg_advisory_lock($1)"
		if l.token {
			q = "select pg_advisory_lock($1), nextval('" + pgTokenSeq + "')"
		}
		if _, err := l.conn.Exec(ctx, q, k); err != nil {
			return nil, err
		}
		return release, nil
	}
	for {
		ok, err := l.try(ctx, k)
		if err != nil {
			return nil, err
		}
		if ok {
			return release, nil
		}
		sleep(ctx, l.retry)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
}

func (l *pgRawLocker) Close() error { l.conn.Release(); return nil }

// openPGBackend returns pglock over a pool of its own of conns connections.
func openPGBackend(ctx context.Context, e *Env, conns int, opts ...pglock.Option) (driver.Backend, *pgxpool.Pool, error) {
	if _, err := newPGBackend(nil); errors.Is(err, errSkip) {
		return nil, nil, err
	}
	pool, err := e.PG(ctx, conns)
	if err != nil {
		return nil, nil, err
	}
	b, err := newPGBackend(pool, opts...)
	if err == nil {
		// Connected at set-up, as the raw rows pin their connections
		// before the clock starts: what a service does at start-up
		// (pglock's Connect documents it).
		if c, ok := b.(interface{ Connect(context.Context) error }); ok {
			err = c.Connect(ctx)
		}
	}
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return b, pool, nil
}

// pgLockxLocker is a lockx Client over pglock with its own pool.
type pgLockxLocker struct {
	lockxLocker
	pool *pgxpool.Pool
}

func openPGLockx(ctx context.Context, e *Env, conns int, opts ...lockx.Option) (Locker, error) {
	return openPGLockxWith(ctx, e, conns, nil, opts...)
}

// openPGLockxWith is openPGLockx with pglock options.
func openPGLockxWith(ctx context.Context, e *Env, conns int, popts []pglock.Option, opts ...lockx.Option) (Locker, error) {
	b, pool, err := openPGBackend(ctx, e, conns, popts...)
	if err != nil {
		return nil, err
	}
	return &pgLockxLocker{lockxLocker: lockxLocker{c: lockx.New(b), opts: opts}, pool: pool}, nil
}

func (l *pgLockxLocker) Close() error {
	err := l.lockxLocker.Close()
	l.pool.Close()
	return err
}

// pinned returns n raw lockers, each on its own connection of one pool.
// With token (blocking only) each grant draws a sequence value too, and
// the connections commit asynchronously, as pglock's sessions do.
func pinned(ctx context.Context, e *Env, n int, blocking, token bool) ([]Locker, func(), error) {
	pool, err := e.PG(ctx, n)
	if err != nil {
		return nil, nil, err
	}
	lks := make([]Locker, n)
	done := func() { closeAll(lks); pool.Close() }
	if token {
		if _, err := pool.Exec(ctx, "create sequence if not exists "+pgTokenSeq); err != nil {
			done()
			return nil, nil, err
		}
	}
	for i := range lks {
		c, err := pool.Acquire(ctx)
		if err == nil && token {
			_, err = c.Exec(ctx, "set synchronous_commit = off")
			if err != nil {
				c.Release()
			}
		}
		if err != nil {
			done()
			return nil, nil, err
		}
		lks[i] = &pgRawLocker{conn: c, blocking: blocking, token: token, retry: time.Millisecond}
	}
	return lks, done, nil
}

func pgCases() []*Case {
	var cs []*Case
	for _, n := range []int{1, pgUncontendedNs} {
		group := groupGoroutines(n)
		cs = append(cs,
			&Case{Section: pgSection, Group: group, Name: namePGRaw, Baseline: true, Quick: n > 1,
				Run: func(ctx context.Context, e *Env, p Params) (Sample, error) {
					lks, done, err := pinned(ctx, e, n, false, false)
					if err != nil {
						return nil, err
					}
					defer done()
					return runPGPairs(ctx, p, lks), nil
				}},
			&Case{Section: pgSection, Group: group, Name: namePGLockx, Quick: n > 1,
				Run: func(ctx context.Context, e *Env, p Params) (Sample, error) {
					// The raw row's pool size, but at least what pglock needs
					// for its holder sessions and listener.
					lk, err := openPGLockx(ctx, e, max(n, pgClientConns), lockx.WithLease(benchLease))
					if err != nil {
						return nil, err
					}
					defer lk.Close()
					return runPGPairs(ctx, p, shared(lk, n)), nil
				}})
	}
	hot := func(name string, baseline bool, open func(ctx context.Context, e *Env) ([]Locker, func(), error)) *Case {
		return &Case{Section: pgHotSection, Group: hotGroup, Name: name, Baseline: baseline,
			Run: func(ctx context.Context, e *Env, p Params) (Sample, error) {
				lks, done, err := open(ctx, e)
				if err != nil {
					return nil, err
				}
				defer done()
				return runHandoffs(ctx, p, lks), nil
			}}
	}
	cs = append(cs,
		hot(namePGHotRaw, true, func(ctx context.Context, e *Env) ([]Locker, func(), error) {
			return pinned(ctx, e, hotClients, false, false)
		}),
		hot(namePGHotBlock, false, func(ctx context.Context, e *Env) ([]Locker, func(), error) {
			return pinned(ctx, e, hotClients, true, false)
		}),
		// The floor of any lock with durable fencing tokens on PostgreSQL:
		// PostgreSQL's own queue plus one sequence value per grant.
		hot(namePGHotToken, false, func(ctx context.Context, e *Env) ([]Locker, func(), error) {
			return pinned(ctx, e, hotClients, true, true)
		}),
		hot(namePGHotLockx, false, func(ctx context.Context, e *Env) ([]Locker, func(), error) {
			return hotPGLockx(ctx, e)
		}),
		// The holder's row written by every grant, as before publication
		// was deferred: the difference to the defaults row is the row.
		hot(namePGHotRowNow, false, func(ctx context.Context, e *Env) ([]Locker, func(), error) {
			lks, err := openN(hotClients, func() (Locker, error) {
				return openPGLockxWith(ctx, e, pgClientConns, []pglock.Option{pglock.WithPublishDelay(0)})
			})
			if err != nil {
				return nil, nil, err
			}
			return lks, func() { closeAll(lks) }, nil
		}),
		// The pool a user gets without sizing it: pgxpool's default
		// MaxConns (max(4, GOMAXPROCS)).
		hot(namePGHotDefPool, false, func(ctx context.Context, e *Env) ([]Locker, func(), error) {
			lks, err := openN(hotClients, func() (Locker, error) { return openPGLockx(ctx, e, 0) })
			if err != nil {
				return nil, nil, err
			}
			return lks, func() { closeAll(lks) }, nil
		}),
		// Every grant a handoff in arrival order, across 16 processes: the
		// release's NOTIFY names the queue's head, which alone retries.
		hot(namePGHotFair, false, func(ctx context.Context, e *Env) ([]Locker, func(), error) {
			return hotPGLockx(ctx, e, lockx.Fair())
		}),
	)
	return cs
}

// hotPGLockx opens the hot-key case's independent lockx clients over
// pglock, each with a pool of its own.
func hotPGLockx(ctx context.Context, e *Env, opts ...lockx.Option) ([]Locker, func(), error) {
	lks, err := openN(hotClients, func() (Locker, error) { return openPGLockx(ctx, e, pgClientConns, opts...) })
	if err != nil {
		return nil, nil, err
	}
	return lks, func() { closeAll(lks) }, nil
}

// runPGPairs is runPairs for PostgreSQL: worker w uses lks[w] on its own key.
func runPGPairs(ctx context.Context, p Params, lks []Locker) Sample {
	keys := make([]string, len(lks))
	for i := range keys {
		keys[i] = fmt.Sprintf("u:%d", i)
	}
	return drive(ctx, p, len(lks), func(ctx context.Context, w int, r *recorder) {
		t := time.Now()
		if err := lks[w].Pair(ctx, keys[w]); err != nil {
			if ctx.Err() == nil {
				r.fail()
			}
			return
		}
		r.ok(time.Since(t))
	})
}
