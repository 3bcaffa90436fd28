package breaker

//go:generate go run gen.go

import (
	"context"
	"errors"
	"time"

	"github.com/lockx-go/lockx/lockx"
)

// One type per optional capability, each forwarding through the breaker.
// combos.go (go generate) puts together the ones a wrapped backend has.

type notifier struct {
	br *Breaker
	n  lockx.Notifier
}

// Watch implements lockx.Notifier. While the breaker is open it fails at
// once, so Acquire does not block on a subscription to a dead backend.
func (w notifier) Watch(ctx context.Context, key string, owner lockx.Owner) (wake <-chan struct{}, cancel func(), err error) {
	done, err := w.br.allow("watch")
	if err != nil {
		return nil, nil, err
	}
	wctx, stop := context.WithTimeout(ctx, w.br.watchTimeout)
	wake, cancel, err = w.n.Watch(wctx, key, owner)
	stop()
	if err != nil && ctx.Err() == nil {
		err = lockx.Unavailable("watch", err) // our bound, not the caller's: the backend's fault
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
	x  lockx.BatchExtender
}

// ExtendMany implements lockx.BatchExtender as one call of the breaker: it
// fails if every renewal failed as unavailable (a transport failure).
func (w batchExtender) ExtendMany(ctx context.Context, reqs []lockx.ExtendRequest) []error {
	done, err := w.br.allow("extend")
	if err != nil {
		errs := make([]error, len(reqs))
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	errs := w.x.ExtendMany(ctx, reqs)
	var verdict error
	if len(errs) > 0 {
		verdict = errs[0]
		for _, e := range errs {
			if e == nil || !errors.Is(e, lockx.ErrUnavailable) {
				verdict = nil
				break
			}
		}
	}
	done(ctx, verdict)
	return errs
}

// PartitionExtends implements lockx.ExtendPartitioner by asking the
// wrapped backend when it is one, so a stalled Cluster node still delays
// only its own renewals behind a breaker; each group's ExtendMany is then
// one call of the breaker. Otherwise nil: one group, as without it.
func (w batchExtender) PartitionExtends(ctx context.Context, reqs []lockx.ExtendRequest) [][]int {
	if p, ok := w.x.(lockx.ExtendPartitioner); ok {
		return p.PartitionExtends(ctx, reqs)
	}
	return nil
}

type fenceStore struct {
	br *Breaker
	f  lockx.FenceStore
}

// Fence implements lockx.FenceStore.
func (w fenceStore) Fence(ctx context.Context, resource string, token lockx.Token) error {
	return w.br.call(ctx, "fence", func() error { return w.f.Fence(ctx, resource, token) })
}

type rwBackend struct {
	br *Breaker
	r  lockx.RWBackend
}

// AcquireRW implements lockx.RWBackend.
func (w rwBackend) AcquireRW(ctx context.Context, mode lockx.RWMode, req lockx.Request) (res lockx.Result, err error) {
	err = w.br.call(ctx, "acquire", func() error {
		res, err = w.r.AcquireRW(ctx, mode, req)
		return err
	})
	if err != nil {
		return lockx.Result{}, err
	}
	return res, nil
}

// ExtendRW implements lockx.RWBackend.
func (w rwBackend) ExtendRW(ctx context.Context, mode lockx.RWMode, key string, owner lockx.Owner, lease time.Duration) error {
	return w.br.call(ctx, "extend", func() error { return w.r.ExtendRW(ctx, mode, key, owner, lease) })
}

// ReleaseRW implements lockx.RWBackend.
func (w rwBackend) ReleaseRW(ctx context.Context, mode lockx.RWMode, key string, owner lockx.Owner) error {
	return w.br.call(ctx, "release", func() error { return w.r.ReleaseRW(ctx, mode, key, owner) })
}

type semaphoreBackend struct {
	br *Breaker
	s  lockx.SemaphoreBackend
}

// AcquirePermits implements lockx.SemaphoreBackend.
func (w semaphoreBackend) AcquirePermits(ctx context.Context, req lockx.PermitRequest) (res lockx.Result, err error) {
	err = w.br.call(ctx, "acquire", func() error {
		res, err = w.s.AcquirePermits(ctx, req)
		return err
	})
	if err != nil {
		return lockx.Result{}, err
	}
	return res, nil
}

// ExtendPermits implements lockx.SemaphoreBackend.
func (w semaphoreBackend) ExtendPermits(ctx context.Context, key string, owner lockx.Owner, lease time.Duration) error {
	return w.br.call(ctx, "extend", func() error { return w.s.ExtendPermits(ctx, key, owner, lease) })
}

// ReleasePermits implements lockx.SemaphoreBackend.
func (w semaphoreBackend) ReleasePermits(ctx context.Context, key string, owner lockx.Owner) error {
	return w.br.call(ctx, "release", func() error { return w.s.ReleasePermits(ctx, key, owner) })
}

// Permits implements lockx.SemaphoreBackend.
func (w semaphoreBackend) Permits(ctx context.Context, key string) (u lockx.PermitUsage, err error) {
	err = w.br.call(ctx, "permits", func() error {
		u, err = w.s.Permits(ctx, key)
		return err
	})
	return u, err
}

type resultStore struct {
	br *Breaker
	r  lockx.ResultStore
}

// LoadResult implements lockx.ResultStore.
func (w resultStore) LoadResult(ctx context.Context, key string) (o lockx.Outcome, err error) {
	err = w.br.call(ctx, "load result", func() error {
		o, err = w.r.LoadResult(ctx, key)
		return err
	})
	return o, err
}

// SaveResult implements lockx.ResultStore.
func (w resultStore) SaveResult(ctx context.Context, key string, o lockx.Outcome, retention time.Duration) (stored lockx.Outcome, won bool, err error) {
	err = w.br.call(ctx, "save result", func() error {
		stored, won, err = w.r.SaveResult(ctx, key, o, retention)
		return err
	})
	return stored, won, err
}

// DeleteResult implements lockx.ResultStore.
func (w resultStore) DeleteResult(ctx context.Context, key string) error {
	return w.br.call(ctx, "delete result", func() error { return w.r.DeleteResult(ctx, key) })
}

type inspector struct {
	br *Breaker
	i  lockx.Inspector
}

// Locks implements lockx.Inspector.
func (w inspector) Locks(ctx context.Context, prefix string, fn func(lockx.LockInfo) bool) error {
	return w.br.call(ctx, "inspect", func() error { return w.i.Locks(ctx, prefix, fn) })
}

// Lock implements lockx.Inspector.
func (w inspector) Lock(ctx context.Context, key string) (li lockx.LockInfo, err error) {
	err = w.br.call(ctx, "inspect", func() error {
		li, err = w.i.Lock(ctx, key)
		return err
	})
	return li, err
}

type stockBackend struct {
	br *Breaker
	s  lockx.StockBackend
}

// InitStock implements lockx.StockBackend.
func (w stockBackend) InitStock(ctx context.Context, sku string, levels []int64) (segs int, created bool, err error) {
	err = w.br.call(ctx, "init stock", func() error {
		segs, created, err = w.s.InitStock(ctx, sku, levels)
		return err
	})
	return segs, created, err
}

// StockLevels implements lockx.StockBackend.
func (w stockBackend) StockLevels(ctx context.Context, sku string, segs []int) (levels []int64, err error) {
	err = w.br.call(ctx, "stock levels", func() error {
		levels, err = w.s.StockLevels(ctx, sku, segs)
		return err
	})
	return levels, err
}

// TakeStock implements lockx.StockBackend.
func (w stockBackend) TakeStock(ctx context.Context, t lockx.StockTake) (level int64, err error) {
	err = w.br.call(ctx, "take stock", func() error {
		level, err = w.s.TakeStock(ctx, t)
		return err
	})
	return level, err
}

// SettleStock implements lockx.StockBackend.
func (w stockBackend) SettleStock(ctx context.Context, sku string, seg int, id string, confirm bool) error {
	return w.br.call(ctx, "settle stock", func() error { return w.s.SettleStock(ctx, sku, seg, id, confirm) })
}

// AddStock implements lockx.StockBackend.
func (w stockBackend) AddStock(ctx context.Context, sku string, seg int, n int64) (level int64, err error) {
	err = w.br.call(ctx, "add stock", func() error {
		level, err = w.s.AddStock(ctx, sku, seg, n)
		return err
	})
	return level, err
}

// ExpireStock implements lockx.StockBackend.
func (w stockBackend) ExpireStock(ctx context.Context, sku string, seg int, max int) (entries []lockx.StockEntry, err error) {
	err = w.br.call(ctx, "expire stock", func() error {
		entries, err = w.s.ExpireStock(ctx, sku, seg, max)
		return err
	})
	return entries, err
}

// StockSegment implements lockx.StockBackend.
func (w stockBackend) StockSegment(ctx context.Context, sku string, seg int) (s lockx.StockSegment, err error) {
	err = w.br.call(ctx, "stock segment", func() error {
		s, err = w.s.StockSegment(ctx, sku, seg)
		return err
	})
	return s, err
}

// ClaimQuota implements lockx.StockBackend.
func (w stockBackend) ClaimQuota(ctx context.Context, sku, user string, delta, limit int64) (n int64, err error) {
	err = w.br.call(ctx, "claim quota", func() error {
		n, err = w.s.ClaimQuota(ctx, sku, user, delta, limit)
		return err
	})
	return n, err
}

type orderStore struct {
	br *Breaker
	o  lockx.OrderStore
}

// SaveOrder implements lockx.OrderStore.
func (w orderStore) SaveOrder(ctx context.Context, o lockx.StockOrder) error {
	return w.br.call(ctx, "save order", func() error { return w.o.SaveOrder(ctx, o) })
}

// CancelOrder implements lockx.OrderStore.
func (w orderStore) CancelOrder(ctx context.Context, sku, id string) error {
	return w.br.call(ctx, "cancel order", func() error { return w.o.CancelOrder(ctx, sku, id) })
}

// OrderedUnits implements lockx.OrderStore.
func (w orderStore) OrderedUnits(ctx context.Context, sku string) (n int64, err error) {
	err = w.br.call(ctx, "ordered units", func() error {
		n, err = w.o.OrderedUnits(ctx, sku)
		return err
	})
	return n, err
}
