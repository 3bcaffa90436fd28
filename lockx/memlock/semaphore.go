package memlock

import (
	"context"
	"slices"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
)

var _ driver.SemaphoreBackend = (*Backend)(nil)

// semEntry is one semaphore. Its counters (inUse, queued) and the
// owner index keep every decision independent of the number of holders and
// waiters: a grant or refusal looks at the queue only as far as the permits
// reach, and expired leases are swept only once the earliest of them is due.
type semEntry struct {
	holders map[driver.Owner]*semHold
	inUse   int64 // permits of the holders
	queue   []*semWaiter
	queued  map[driver.Owner]*semWaiter
	qCount  int64 // permits asked for by the queue
	due     due
}

type semHold struct {
	count   int64
	token   driver.Token
	expires time.Time
}

type semWaiter struct {
	owner    driver.Owner
	count    int64
	limit    int64
	deadline time.Time
}

func (w *semWaiter) ends() time.Time { return w.deadline }

// semTable returns the Backend's semaphores, made on first use. Callers hold
// b.mu.
func (b *Backend) semTable() map[string]*semEntry {
	if b.sems == nil {
		b.sems = make(map[string]*semEntry)
	}
	return b.sems
}

// liveSem returns key's semaphore with expired leases and queue entries
// dropped, or nil if nothing is left. Callers hold b.mu.
func (b *Backend) liveSem(key string, now time.Time) *semEntry {
	e := b.sems[key]
	if e == nil {
		return nil
	}
	if passed(e.due.holds, now) {
		e.due.holds = time.Time{}
		for o, h := range e.holders {
			if !now.Before(h.expires) {
				delete(e.holders, o)
				e.inUse -= h.count
			} else {
				e.due.hold(h.expires)
			}
		}
	}
	e.queue = sweepQueue(&e.due, e.queue, now, func(w *semWaiter) {
		delete(e.queued, w.owner)
		e.qCount -= w.count
	})
	if len(e.holders) == 0 && len(e.queue) == 0 {
		delete(b.sems, key)
		return nil
	}
	return e
}

// AcquirePermits implements driver.SemaphoreBackend.
func (b *Backend) AcquirePermits(ctx context.Context, req driver.PermitRequest) (driver.Result, error) {
	if err := ctx.Err(); err != nil {
		return driver.Result{}, err
	}
	if err := driver.CheckPermitRequest(req); err != nil {
		return driver.Result{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	e := b.liveSem(req.Key, now)
	if e == nil {
		e = &semEntry{holders: make(map[driver.Owner]*semHold), queued: make(map[driver.Owner]*semWaiter)}
		b.semTable()[req.Key] = e
	}
	exp := now.Add(req.Lease)
	if h := e.holders[req.Owner]; h != nil {
		h.expires = exp
		e.due.hold(exp)
		return driver.Result{Acquired: true, Token: h.token, TTL: req.Lease}, nil
	}
	if !e.fits(req) {
		if req.Wait && req.Fair {
			e.enqueue(req, now)
		}
		res := driver.Result{TTL: e.soonestExpiry(now)}
		b.liveSem(req.Key, now)
		return res, nil
	}
	e.dequeue(req.Owner)
	b.token++
	e.holders[req.Owner] = &semHold{count: req.Count, token: b.token, expires: exp}
	e.inUse += req.Count
	e.due.hold(exp)
	if len(e.queue) > 0 {
		b.wakeSem(req.Key, e) // the next in line may fit as well
	}
	return driver.Result{Acquired: true, Token: b.token, TTL: req.Lease}, nil
}

// fits reports whether req can be granted now. First come, first served:
// with Fair the requests queued ahead count as taken, so a large request is
// never overtaken, while the whole prefix of the queue that fits is granted
// at once rather than one head at a time.
func (e *semEntry) fits(req driver.PermitRequest) bool {
	need := e.inUse + req.Count
	if !req.Fair || need > req.Limit {
		return need <= req.Limit
	}
	if e.queued[req.Owner] == nil {
		return need+e.qCount <= req.Limit
	}
	for _, w := range e.queue {
		if w.owner == req.Owner {
			break
		}
		if need += w.count; need > req.Limit {
			return false
		}
	}
	return true
}

func (e *semEntry) enqueue(req driver.PermitRequest, now time.Time) {
	qttl := req.QueueTTL
	if qttl <= 0 {
		qttl = lockx.DefaultQueueTTL
	}
	deadline := now.Add(qttl)
	e.due.queued(deadline)
	if w := e.queued[req.Owner]; w != nil {
		e.qCount += req.Count - w.count
		w.deadline, w.count, w.limit = deadline, req.Count, req.Limit
		return
	}
	w := &semWaiter{owner: req.Owner, count: req.Count, limit: req.Limit, deadline: deadline}
	e.queue = append(e.queue, w)
	e.queued[req.Owner] = w
	e.qCount += req.Count
}

func (e *semEntry) dequeue(owner driver.Owner) bool {
	w := e.queued[owner]
	if w == nil {
		return false
	}
	delete(e.queued, owner)
	e.qCount -= w.count
	if i := slices.Index(e.queue, w); i >= 0 {
		e.queue = slices.Delete(e.queue, i, i+1)
	}
	return true
}

// soonestExpiry bounds a waiter's backoff: the time until the earliest
// lease may end.
func (e *semEntry) soonestExpiry(now time.Time) time.Duration {
	return left(e.due.holds, now)
}

// ExtendPermits implements driver.SemaphoreBackend.
func (b *Backend) ExtendPermits(ctx context.Context, key string, owner driver.Owner, lease time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	e := b.liveSem(key, now)
	if e == nil || e.holders[owner] == nil {
		return driver.ErrNotHeld
	}
	exp := now.Add(lease)
	e.holders[owner].expires = exp
	e.due.hold(exp)
	return nil
}

// ReleasePermits implements driver.SemaphoreBackend.
func (b *Backend) ReleasePermits(ctx context.Context, key string, owner driver.Owner) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	e := b.liveSem(key, now)
	if e == nil {
		return driver.ErrNotHeld
	}
	err := driver.ErrNotHeld
	if h := e.holders[owner]; h != nil {
		delete(e.holders, owner)
		e.inUse -= h.count
		err = nil
	}
	if withdrew := e.dequeue(owner); err == nil || withdrew {
		b.wakeSem(key, e)
	}
	b.liveSem(key, now)
	return err
}

// Permits implements driver.SemaphoreBackend.
func (b *Backend) Permits(ctx context.Context, key string) (driver.PermitUsage, error) {
	if err := ctx.Err(); err != nil {
		return driver.PermitUsage{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.liveSem(key, b.now())
	if e == nil {
		return driver.PermitUsage{}, nil
	}
	return driver.PermitUsage{InUse: e.inUse, Holders: int64(len(e.holders)), Waiting: int64(len(e.queue))}, nil
}

// wakeSem wakes the queued owners whose requests fit, in queue order, up to
// the first that does not; with no one queued, every watcher (non-fair
// waiters do not queue). Callers hold b.mu.
func (b *Backend) wakeSem(key string, e *semEntry) {
	if len(e.queue) == 0 {
		b.wakeEvery(key)
		return
	}
	used := e.inUse
	for _, w := range e.queue {
		if used+w.count > w.limit {
			break
		}
		used += w.count
		b.wakeOwner(key, w.owner)
	}
}
