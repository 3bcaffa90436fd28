package breaker

import (
	"context"
	"errors"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/sony/gobreaker/v2"
	"time"
)

// As answers driver.As for every capability of package driver: if the
// wrapped backend has the capability (found with driver.As, so through its
// own wrappers too), target is set to an adapter that sends each call
// through the breaker. One adapter per capability, whatever combination the
// backend has. A capability missing from this list is not answered, so it
// stays hidden rather than reachable around the breaker;
// TestWrappersKeepCapabilities fails until it is added here.
func (br *Breaker) As(target any) bool {
	switch t := target.(type) {
	case *driver.Notifier:
		return adapt(br, t, func(n driver.Notifier) driver.Notifier { return notifier{br, n} })
	case *driver.BatchExtender:
		return adapt(br, t, func(x driver.BatchExtender) driver.BatchExtender { return batchExtender{br, x} })
	case *driver.ExtendPartitioner:
		return adapt(br, t, func(p driver.ExtendPartitioner) driver.ExtendPartitioner { return partitioner{br, p} })
	case *driver.LossNotifier:
		return adapt(br, t, func(l driver.LossNotifier) driver.LossNotifier { return lossNotifier{l} })
	case *driver.Passer:
		return adapt(br, t, func(p driver.Passer) driver.Passer { return passer{br, p} })
	case *driver.ManyAcquirer:
		return adapt(br, t, func(m driver.ManyAcquirer) driver.ManyAcquirer { return manyAcquirer{br, m} })
	case *driver.ManyReleaser:
		return adapt(br, t, func(m driver.ManyReleaser) driver.ManyReleaser { return manyReleaser{br, m} })
	case *driver.FenceStore:
		return adapt(br, t, func(f driver.FenceStore) driver.FenceStore { return fenceStore{br, f} })
	case *driver.RWBackend:
		return adapt(br, t, func(r driver.RWBackend) driver.RWBackend { return rwBackend{br, r} })
	case *driver.SemaphoreBackend:
		return adapt(br, t, func(s driver.SemaphoreBackend) driver.SemaphoreBackend { return semaphoreBackend{br, s} })
	case *driver.ResultStore:
		return adapt(br, t, func(r driver.ResultStore) driver.ResultStore { return resultStore{br, r} })
	case *driver.Inspector:
		return adapt(br, t, func(i driver.Inspector) driver.Inspector { return inspector{br, i} })
	case *driver.StockBackend:
		return adapt(br, t, func(s driver.StockBackend) driver.StockBackend { return stockBackend{br, s} })
	case *driver.Clock:
		return adapt(br, t, func(c driver.Clock) driver.Clock { return clock{br, c} })
	}
	return false
}

// adapt sets *target to gate(inner) if the wrapped backend has capability C.
func adapt[C any](br *Breaker, target *C, gate func(C) C) bool {
	var inner C
	if !driver.As(br.b, &inner) {
		return false
	}
	*target = gate(inner)
	return true
}

type notifier struct {
	br *Breaker
	n  driver.Notifier
}

// Watch implements driver.Notifier. While the breaker is open it fails at
// once, so Acquire does not block on a subscription to a dead backend.
func (w notifier) Watch(ctx context.Context, key string, owner driver.Owner) (wake <-chan struct{}, cancel func(), err error) {
	done, err := w.br.allow("watch")
	if err != nil {
		return nil, nil, err
	}
	wctx, stop := context.WithTimeout(ctx, w.br.watchTimeout)
	wake, cancel, err = w.n.Watch(wctx, key, owner)
	stop()
	if err != nil && ctx.Err() == nil {
		err = driver.Unavailable("watch", err) // our bound, not the caller's: the backend's fault
		done(context.Background(), err)
		return nil, nil, err
	}
	if err == nil {
		// A registration can succeed from local state while the backend
		// is down (a subscription not yet known to be broken): it proves
		// nothing about the backend, so it must not reset the failures
		// counted by the calls that do reach it.
		done(ctx, errExcluded)
	} else {
		done(ctx, err)
	}
	return wake, cancel, err
}

type batchExtender struct {
	br *Breaker
	x  driver.BatchExtender
}

// ExtendMany implements driver.BatchExtender as one call of the breaker: it
// fails if every renewal failed as unavailable (a transport failure).
func (w batchExtender) ExtendMany(ctx context.Context, reqs []driver.ExtendRequest) []error {
	done, err := w.br.allow("extend")
	if err != nil {
		return refuseAll(len(reqs), err)
	}
	errs := w.x.ExtendMany(ctx, reqs)
	done(ctx, oneCall(errs))
	return errs
}

// oneCall folds the per-request errors of a batch call (ExtendMany,
// ReleaseMany) into the verdict of one call of the breaker: a failure only
// if every request failed as unavailable (a transport failure).
func oneCall(errs []error) error {
	for _, e := range errs {
		if e == nil || !errors.Is(e, driver.ErrUnavailable) {
			return nil
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return errs[0]
}

// refuseAll is the answer of a refused batch call: err for every request.
func refuseAll(n int, err error) []error {
	errs := make([]error, n)
	for i := range errs {
		errs[i] = err
	}
	return errs
}

type partitioner struct {
	br *Breaker
	p  driver.ExtendPartitioner
}

// PartitionExtends implements driver.ExtendPartitioner by asking the
// wrapped backend, so a stalled Cluster node still delays only its own
// renewals behind a breaker; each group's ExtendMany is then one call of
// the breaker. It reads routing state and changes nothing, so it is not
// counted; while the breaker is open it answers nil (one group) without
// asking, as the ExtendMany that follows is refused anyway.
func (w partitioner) PartitionExtends(ctx context.Context, reqs []driver.ExtendRequest) [][]int {
	if w.br.cb.State() == gobreaker.StateOpen {
		return nil
	}
	return w.p.PartitionExtends(ctx, reqs)
}

type lossNotifier struct{ l driver.LossNotifier }

// NotifyLoss implements driver.LossNotifier by forwarding: it arranges a
// callback in the wrapped backend's own process (no call to the store), and
// a loss it reports must reach the holder whatever the breaker's state —
// holding back the news of a lost lock would fail open.
func (w lossNotifier) NotifyLoss(key string, owner driver.Owner, fn func()) (stop func()) {
	return w.l.NotifyLoss(key, owner, fn)
}

type manyAcquirer struct {
	br *Breaker
	m  driver.ManyAcquirer
}

// AcquireMany implements driver.ManyAcquirer as one call of the breaker.
func (w manyAcquirer) AcquireMany(ctx context.Context, reqs []driver.Request) (res []driver.Result, err error) {
	err = w.br.call(ctx, "acquire many", func() error {
		res, err = w.m.AcquireMany(ctx, reqs)
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

type passer struct {
	br *Breaker
	p  driver.Passer
}

// Pass implements driver.Passer as one call of the breaker, like Acquire:
// while the breaker is open it is refused, and the Client's release falls
// back to Release, which the breaker refuses too.
func (w passer) Pass(ctx context.Context, key string, from, to driver.Owner, lease time.Duration) (driver.Result, error) {
	return w.br.grant(ctx, "pass", func() (driver.Result, error) { return w.p.Pass(ctx, key, from, to, lease) })
}

type manyReleaser struct {
	br *Breaker
	m  driver.ManyReleaser
}

// ReleaseMany implements driver.ManyReleaser as one call of the breaker: it
// fails if every release failed as unavailable. While the breaker is open
// every key gets its refusal, and the Client retries each key with Release,
// which the breaker refuses too: the keys stay held until their leases end,
// as with a backend that is down.
func (w manyReleaser) ReleaseMany(ctx context.Context, keys []string, owner driver.Owner) []error {
	done, err := w.br.allow("release")
	if err != nil {
		return refuseAll(len(keys), err)
	}
	errs := w.m.ReleaseMany(ctx, keys, owner)
	done(ctx, oneCall(errs))
	return errs
}

type fenceStore struct {
	br *Breaker
	f  driver.FenceStore
}

// Fence implements driver.FenceStore.
func (w fenceStore) Fence(ctx context.Context, resource string, token driver.Token) error {
	return w.br.call(ctx, "fence", func() error { return w.f.Fence(ctx, resource, token) })
}

type rwBackend struct {
	br *Breaker
	r  driver.RWBackend
}

// AcquireRW implements driver.RWBackend.
func (w rwBackend) AcquireRW(ctx context.Context, mode driver.RWMode, req driver.Request) (res driver.Result, err error) {
	err = w.br.call(ctx, "acquire", func() error {
		res, err = w.r.AcquireRW(ctx, mode, req)
		return err
	})
	if err != nil {
		return driver.Result{}, err
	}
	return res, nil
}

// ExtendRW implements driver.RWBackend.
func (w rwBackend) ExtendRW(ctx context.Context, mode driver.RWMode, key string, owner driver.Owner, lease time.Duration) error {
	return w.br.call(ctx, "extend", func() error { return w.r.ExtendRW(ctx, mode, key, owner, lease) })
}

// ReleaseRW implements driver.RWBackend.
func (w rwBackend) ReleaseRW(ctx context.Context, mode driver.RWMode, key string, owner driver.Owner) error {
	return w.br.call(ctx, "release", func() error { return w.r.ReleaseRW(ctx, mode, key, owner) })
}

type semaphoreBackend struct {
	br *Breaker
	s  driver.SemaphoreBackend
}

// AcquirePermits implements driver.SemaphoreBackend.
func (w semaphoreBackend) AcquirePermits(ctx context.Context, req driver.PermitRequest) (res driver.Result, err error) {
	err = w.br.call(ctx, "acquire", func() error {
		res, err = w.s.AcquirePermits(ctx, req)
		return err
	})
	if err != nil {
		return driver.Result{}, err
	}
	return res, nil
}

// ExtendPermits implements driver.SemaphoreBackend.
func (w semaphoreBackend) ExtendPermits(ctx context.Context, key string, owner driver.Owner, lease time.Duration) error {
	return w.br.call(ctx, "extend", func() error { return w.s.ExtendPermits(ctx, key, owner, lease) })
}

// ReleasePermits implements driver.SemaphoreBackend.
func (w semaphoreBackend) ReleasePermits(ctx context.Context, key string, owner driver.Owner) error {
	return w.br.call(ctx, "release", func() error { return w.s.ReleasePermits(ctx, key, owner) })
}

// Permits implements driver.SemaphoreBackend.
func (w semaphoreBackend) Permits(ctx context.Context, key string) (u driver.PermitUsage, err error) {
	err = w.br.call(ctx, "permits", func() error {
		u, err = w.s.Permits(ctx, key)
		return err
	})
	return u, err
}

type resultStore struct {
	br *Breaker
	r  driver.ResultStore
}

// LoadResult implements driver.ResultStore.
func (w resultStore) LoadResult(ctx context.Context, key string) (o driver.Outcome, err error) {
	err = w.br.call(ctx, "load result", func() error {
		o, err = w.r.LoadResult(ctx, key)
		return err
	})
	return o, err
}

// SaveResult implements driver.ResultStore.
func (w resultStore) SaveResult(ctx context.Context, key string, o driver.Outcome, retention time.Duration) (stored driver.Outcome, won bool, err error) {
	err = w.br.call(ctx, "save result", func() error {
		stored, won, err = w.r.SaveResult(ctx, key, o, retention)
		return err
	})
	return stored, won, err
}

// DeleteResult implements driver.ResultStore.
func (w resultStore) DeleteResult(ctx context.Context, key string) error {
	return w.br.call(ctx, "delete result", func() error { return w.r.DeleteResult(ctx, key) })
}

type inspector struct {
	br *Breaker
	i  driver.Inspector
}

// Locks implements driver.Inspector.
func (w inspector) Locks(ctx context.Context, prefix string, fn func(driver.LockInfo) bool) error {
	return w.br.call(ctx, "inspect", func() error { return w.i.Locks(ctx, prefix, fn) })
}

// Lock implements driver.Inspector.
func (w inspector) Lock(ctx context.Context, key string) (li driver.LockInfo, err error) {
	err = w.br.call(ctx, "inspect", func() error {
		li, err = w.i.Lock(ctx, key)
		return err
	})
	return li, err
}

type stockBackend struct {
	br *Breaker
	s  driver.StockBackend
}

// InitStock implements driver.StockBackend.
func (w stockBackend) InitStock(ctx context.Context, sku string, levels []int64) (segs int, created bool, err error) {
	err = w.br.call(ctx, "init stock", func() error {
		segs, created, err = w.s.InitStock(ctx, sku, levels)
		return err
	})
	return segs, created, err
}

// StockLevels implements driver.StockBackend.
func (w stockBackend) StockLevels(ctx context.Context, sku string, segs []int) (levels []int64, err error) {
	err = w.br.call(ctx, "stock levels", func() error {
		levels, err = w.s.StockLevels(ctx, sku, segs)
		return err
	})
	return levels, err
}

// TakeStock implements driver.StockBackend.
func (w stockBackend) TakeStock(ctx context.Context, t driver.StockTake) (level int64, err error) {
	err = w.br.call(ctx, "take stock", func() error {
		level, err = w.s.TakeStock(ctx, t)
		return err
	})
	return level, err
}

// SettleStock implements driver.StockBackend.
func (w stockBackend) SettleStock(ctx context.Context, sku string, seg int, id string, confirm bool) error {
	return w.br.call(ctx, "settle stock", func() error { return w.s.SettleStock(ctx, sku, seg, id, confirm) })
}

// AddStock implements driver.StockBackend.
func (w stockBackend) AddStock(ctx context.Context, sku string, seg int, n int64) (level int64, err error) {
	err = w.br.call(ctx, "add stock", func() error {
		level, err = w.s.AddStock(ctx, sku, seg, n)
		return err
	})
	return level, err
}

// ExpireStock implements driver.StockBackend.
func (w stockBackend) ExpireStock(ctx context.Context, sku string, seg int, max int) (entries []driver.StockEntry, err error) {
	err = w.br.call(ctx, "expire stock", func() error {
		entries, err = w.s.ExpireStock(ctx, sku, seg, max)
		return err
	})
	return entries, err
}

// StockSegment implements driver.StockBackend.
func (w stockBackend) StockSegment(ctx context.Context, sku string, seg int) (s driver.StockSegment, err error) {
	err = w.br.call(ctx, "stock segment", func() error {
		s, err = w.s.StockSegment(ctx, sku, seg)
		return err
	})
	return s, err
}

// ClaimQuota implements driver.StockBackend.
func (w stockBackend) ClaimQuota(ctx context.Context, sku, user string, delta, limit int64) (n int64, err error) {
	err = w.br.call(ctx, "claim quota", func() error {
		n, err = w.s.ClaimQuota(ctx, sku, user, delta, limit)
		return err
	})
	return n, err
}

type clock struct {
	br *Breaker
	c  driver.Clock
}

// Now implements driver.Clock: asking the store's time is a backend call.
func (w clock) Now(ctx context.Context) (t time.Time, err error) {
	err = w.br.call(ctx, "now", func() error {
		t, err = w.c.Now(ctx)
		return err
	})
	return t, err
}

// Resolution implements driver.Clock. It is a constant of the backend, not
// a call to the store, so it is not gated.
func (w clock) Resolution() time.Duration { return w.c.Resolution() }
