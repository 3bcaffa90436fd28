package bench

import (
	"context"
	"errors"
	"net/http/httptest"

	"github.com/lockx-go/lockx/internal/lockxd"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/httplock"
)

// The lockxd tables: the lock service's cost over the same backend, measured
// in the same run. lockxd runs in this process (its handler on a loopback
// httptest server, HTTP/1.1 with keep-alive), clients are lockx Clients over
// lockx/httplock; "direct" rows are lockx Clients over the backend itself.
const (
	lockxdSection    = "lockxd"
	lockxdHotSection = "lockxdhot"
	benchAPIKey      = "bench-key"

	nameLxdRedisDirect = "lockx Acquire + Release, redislock direct"
	nameLxdRedis       = "lockx Acquire + Release through lockxd (httplock) over redislock"
	nameLxdPGDirect    = "lockx Acquire + Release, pglock direct"
	nameLxdPG          = "lockx Acquire + Release through lockxd (httplock) over pglock"
	nameLxdHotDirect   = "lockx Acquire, redislock direct"
	nameLxdHot         = "lockx Acquire through lockxd (httplock) over redislock"
	nameLxdHotFairDir  = "lockx Acquire Fair(), redislock direct"
	nameLxdHotFair     = "lockx Acquire Fair() through lockxd (httplock) over redislock"
)

// lockxdService is one in-process lockxd over a backend.
type lockxdService struct {
	srv   *lockxd.Server
	ts    *httptest.Server
	close func() error // the backend and its connections
}

func startLockxd(b driver.Backend, closeBackend func() error) *lockxdService {
	srv := lockxd.NewServer(b, lockxd.Config{Tenants: []lockxd.TenantConfig{{Tenant: "bench", SHA256: lockxd.HashKey(benchAPIKey)}}})
	return &lockxdService{srv: srv, ts: httptest.NewServer(srv), close: closeBackend}
}

// client returns a Locker: a lockx Client of its own over httplock.
func (s *lockxdService) client(opts ...lockx.Option) Locker {
	return &lockxLocker{c: lockx.New(httplock.New(s.ts.URL, benchAPIKey)), opts: opts}
}

func (s *lockxdService) Close() error {
	s.srv.Shutdown() // ends watch streams, so the server can close
	s.ts.Close()
	return s.close()
}

// redisLockxd starts lockxd over redislock with its own go-redis client.
func redisLockxd(ctx context.Context, e *Env, poolSize int) (*lockxdService, error) {
	b, rdb, err := openRedisBackend(ctx, e, poolSize)
	if err != nil {
		return nil, err
	}
	return startLockxd(b, func() error { return errors.Join(b.Close(), rdb.Close()) }), nil
}

// pgLockxd starts lockxd over pglock with its own pool.
func pgLockxd(ctx context.Context, e *Env, conns int) (*lockxdService, error) {
	b, pool, err := openPGBackend(ctx, e, conns)
	if err != nil {
		return nil, err
	}
	return startLockxd(b, func() error { err := b.Close(); pool.Close(); return err }), nil
}

// viaLockxd is an opener of one client over its own lockxd: the Locker
// closes both.
func viaLockxd(start func(ctx context.Context, e *Env, poolSize int) (*lockxdService, error), opts ...lockx.Option) opener {
	return func(ctx context.Context, e *Env, poolSize int) (Locker, error) {
		s, err := start(ctx, e, poolSize)
		if err != nil {
			return nil, err
		}
		return &serviceLocker{Locker: s.client(opts...), s: s}, nil
	}
}

type serviceLocker struct {
	Locker
	s *lockxdService
}

func (l *serviceLocker) Close() error { return errors.Join(l.Locker.Close(), l.s.Close()) }

// The lockxd tables of the report.
var (
	lockxdTable = section{
		key:   lockxdSection,
		title: "lockxd: uncontended acquire + release through the lock service vs direct",
		intro: "The same backend, the same run: a lockx Client over the backend (direct) against a lockx Client over lockx/httplock talking to lockxd, which runs in this process on a loopback httptest server (HTTP/1.1, keep-alive) over its own backend client of the same size. Each goroutine acquires and releases its own key (WithLease, no watchdog): through lockxd that is two HTTP requests, each one backend call. The ratio is the overhead of the service.",
		cols:  []col{colRate("pairs/s"), colP50, colP99, colRTT("Redis round trips/pair"), colFail},
		ratio: mRate, ratioHeader: "× direct (per run)",
	}
	lockxdHotTable = section{
		key:   lockxdHotSection,
		title: "lockxd: one hot key, 16 clients, through the lock service vs direct",
		intro: "16 independent lockx Clients on one key, as in the hot-key table: direct rows over redislock (a go-redis client each), lockxd rows over lockx/httplock to one in-process lockxd over redislock. Through lockxd a waiter is woken by a server-sent event (GET /v1/watch) that lockxd sends when the backend's notification reaches it, then takes the lock with one more request.",
		cols:  waitCols,
		ratio: mRate, ratioHeader: "× direct (per run)",
	}
)

func lockxdCases() []*Case {
	lease := lockx.WithLease(benchLease)
	pgDirect := func(ctx context.Context, e *Env, poolSize int) (Locker, error) {
		return openPGLockx(ctx, e, max(poolSize, pgClientConns), lease)
	}
	pgStart := func(ctx context.Context, e *Env, poolSize int) (*lockxdService, error) {
		return pgLockxd(ctx, e, max(poolSize, pgClientConns))
	}
	var cs []*Case
	for _, g := range []struct {
		group   string
		n       int
		direct  string
		dOpen   opener
		service string
		sOpen   opener
	}{
		{"Redis, 1 goroutine", 1, nameLxdRedisDirect, lockxRedisLib(false, lease), nameLxdRedis, viaLockxd(redisLockxd, lease)},
		{"Redis, 16 goroutines", 16, nameLxdRedisDirect, lockxRedisLib(false, lease), nameLxdRedis, viaLockxd(redisLockxd, lease)},
		{"PostgreSQL, 1 goroutine", 1, nameLxdPGDirect, pgDirect, nameLxdPG, viaLockxd(pgStart, lease)},
	} {
		cs = append(cs,
			&Case{Section: lockxdSection, Group: g.group, Name: g.direct, Baseline: true,
				Run: func(ctx context.Context, e *Env, p Params) (Sample, error) {
					return runPairsProbed(ctx, e, p, g.dOpen, g.n)
				}},
			&Case{Section: lockxdSection, Group: g.group, Name: g.service,
				Run: func(ctx context.Context, e *Env, p Params) (Sample, error) {
					return runPairsProbed(ctx, e, p, g.sOpen, g.n)
				}})
	}
	hot := func(name string, baseline, service bool, opts ...lockx.Option) *Case {
		return &Case{Section: lockxdHotSection, Group: hotGroup, Name: name, Baseline: baseline,
			Run: func(ctx context.Context, e *Env, p Params) (Sample, error) {
				if !service {
					lks, err := openN(hotClients, func() (Locker, error) { return lockxRedisLib(false, opts...)(ctx, e, 0) })
					if err != nil {
						return nil, err
					}
					defer closeAll(lks)
					return runHandoffs(ctx, p, lks, e.cmdProbe()), nil
				}
				// One lockxd (as one service would be deployed), 16 clients
				// of it, each with its own HTTP connections.
				s, err := redisLockxd(ctx, e, 0)
				if err != nil {
					return nil, err
				}
				defer s.Close()
				lks, _ := openN(hotClients, func() (Locker, error) { return s.client(opts...), nil })
				defer closeAll(lks)
				return runHandoffs(ctx, p, lks, e.cmdProbe()), nil
			}}
	}
	return append(cs,
		hot(nameLxdHotDirect, true, false),
		hot(nameLxdHot, false, true),
		hot(nameLxdHotFairDir, false, false, lockx.Fair()),
		hot(nameLxdHotFair, false, true, lockx.Fair()),
	)
}
