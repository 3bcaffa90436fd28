package bench

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/etcdlock"
	"github.com/lockx-go/lockx/lockx/etcdlock/etcdtest"
)

// Sections and row names of the etcd tables.
const (
	etcdSection       = "etcd"
	etcdHotSection    = "etcdhot"
	nameEtcdRaw       = "etcd concurrency.Mutex (its recipe: one session lease, put + read the head, delete)"
	nameEtcdLockx     = "lockx Acquire + Release (etcdlock)"
	nameEtcdHotRaw    = "etcd concurrency.Mutex (blocks on its predecessor's watch)"
	nameEtcdHotLockx  = "lockx Acquire (etcdlock, defaults: every waiter queues)"
	nameEtcdHotFair   = "lockx Acquire Fair (etcdlock)"
	etcdUncontendedNs = 16
)

// Etcd returns the client endpoint of the benchmark's etcd, starting it on
// first use: one member in this process (go.etcd.io/etcd/server/v3/embed),
// default durability (the write-ahead log fsynced), on ports of 7900–7999.
func (e *Env) Etcd(ctx context.Context) ([]string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.etcd == nil {
		c, err := etcdtest.Start(etcdtest.Config{PortMin: firstPort, PortMax: lastPort, Fsync: true})
		if err != nil {
			return nil, err
		}
		e.etcd = c
	}
	return e.etcd.Endpoints(), nil
}

func etcdClient(ctx context.Context, e *Env) (*clientv3.Client, error) {
	eps, err := e.Etcd(ctx)
	if err != nil {
		return nil, err
	}
	return etcdtest.NewClient(eps...)
}

// etcdRawLocker is etcd's own lock recipe: one session (a lease kept alive
// by the client) shared by the goroutines, a Mutex per lock.
type etcdRawLocker struct {
	cli    *clientv3.Client
	s      *concurrency.Session
	prefix string
}

func (l *etcdRawLocker) Lock(ctx context.Context, key string) (func(context.Context) error, error) {
	m := concurrency.NewMutex(l.s, l.prefix+"raw/"+key)
	if err := m.Lock(ctx); err != nil {
		return nil, err
	}
	return m.Unlock, nil
}

func (l *etcdRawLocker) Pair(ctx context.Context, key string) error {
	unlock, err := l.Lock(ctx, key)
	if err != nil {
		return err
	}
	return unlock(ctx)
}

func (l *etcdRawLocker) Close() error {
	_ = l.s.Close()
	return l.cli.Close()
}

func openEtcdRaw(ctx context.Context, e *Env, prefix string) (Locker, error) {
	cli, err := etcdClient(ctx, e)
	if err != nil {
		return nil, err
	}
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(int(benchLease/time.Second)))
	if err != nil {
		cli.Close()
		return nil, fmt.Errorf("etcd session: %w", err)
	}
	return &etcdRawLocker{cli: cli, s: s, prefix: prefix}, nil
}

// openEtcdLockx opens a lockx client over etcdlock under prefix: each case
// run gets a prefix of its own, so that entries a case leaves behind (a
// waiter cut off by the end of its case, until its queue TTL) cannot hold
// up the next one.
func openEtcdLockx(ctx context.Context, e *Env, prefix string, opts ...lockx.Option) (Locker, error) {
	cli, err := etcdClient(ctx, e)
	if err != nil {
		return nil, err
	}
	return &lockxLocker{c: lockx.New(etcdlock.New(cli, etcdlock.WithPrefix(prefix))), opts: opts, close: cli.Close}, nil
}

// etcdRunPrefix is a key prefix no earlier case run used.
func etcdRunPrefix() string { return fmt.Sprintf("/lockxbench/%d/", time.Now().UnixNano()) }

func etcdCases() []*Case {
	var cs []*Case
	for _, n := range []int{1, etcdUncontendedNs} {
		group := groupGoroutines(n)
		pairs := func(name string, baseline bool, open func(ctx context.Context, e *Env, prefix string) (Locker, error)) *Case {
			return &Case{Section: etcdSection, Group: group, Name: name, Baseline: baseline, Quick: n > 1,
				Run: func(ctx context.Context, e *Env, p Params) (Sample, error) {
					lk, err := open(ctx, e, etcdRunPrefix())
					if err != nil {
						return nil, err
					}
					defer lk.Close()
					return runPGPairs(ctx, p, shared(lk, n)), nil
				}}
		}
		cs = append(cs,
			pairs(nameEtcdRaw, true, openEtcdRaw),
			pairs(nameEtcdLockx, false, func(ctx context.Context, e *Env, prefix string) (Locker, error) {
				return openEtcdLockx(ctx, e, prefix, lockx.WithLease(benchLease))
			}))
	}
	hot := func(name string, baseline bool, open func(ctx context.Context, e *Env, prefix string) (Locker, error)) *Case {
		return &Case{Section: etcdHotSection, Group: hotGroup, Name: name, Baseline: baseline, Quick: true,
			Run: func(ctx context.Context, e *Env, p Params) (Sample, error) {
				prefix := etcdRunPrefix()
				lks, err := openN(hotClients, func() (Locker, error) { return open(ctx, e, prefix) })
				if err != nil {
					return nil, err
				}
				defer closeAll(lks)
				return runHandoffs(ctx, p, lks), nil
			}}
	}
	cs = append(cs,
		hot(nameEtcdHotRaw, true, openEtcdRaw),
		hot(nameEtcdHotLockx, false, func(ctx context.Context, e *Env, prefix string) (Locker, error) {
			return openEtcdLockx(ctx, e, prefix)
		}),
		hot(nameEtcdHotFair, false, func(ctx context.Context, e *Env, prefix string) (Locker, error) {
			return openEtcdLockx(ctx, e, prefix, lockx.Fair())
		}),
	)
	return cs
}
