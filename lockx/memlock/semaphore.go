package memlock

import (
	"context"
	"time"

	"github.com/lockx-go/lockx/lockx"
)

var _ lockx.SemaphoreBackend = (*Backend)(nil)

type semEntry struct {
	holders map[lockx.Owner]*semHold
	queue   []semWaiter
}

type semHold struct {
	count   int64
	token   lockx.Token
	expires time.Time
}

type semWaiter struct {
	owner    lockx.Owner
	count    int64
	limit    int64
	deadline time.Time
}

// liveSem returns key's semaphore with expired leases and queue entries
// dropped, or nil if nothing is left. Callers hold b.mu.
func (b *Backend) liveSem(key string, now time.Time) *semEntry {
	st := stateOf(b)
	e := st.sems[key]
	if e == nil {
		return nil
	}
	for o, h := range e.holders {
		if !now.Before(h.expires) {
			delete(e.holders, o)
		}
	}
	q := e.queue[:0]
	for _, w := range e.queue {
		if now.Before(w.deadline) {
			q = append(q, w)
		}
	}
	e.queue = q
	if len(e.holders) == 0 && len(e.queue) == 0 {
		delete(st.sems, key)
		return nil
	}
	return e
}

func (e *semEntry) inUse() int64 {
	var n int64
	for _, h := range e.holders {
		n += h.count
	}
	return n
}

func checkPermitRequest(req lockx.PermitRequest) error {
	switch {
	case req.Limit <= 0:
		return &lockx.ArgError{Arg: "limit", Reason: "must be positive"}
	case req.Count <= 0:
		return &lockx.ArgError{Arg: "permits", Reason: "must be positive"}
	case req.Count > req.Limit:
		return &lockx.ArgError{Arg: "permits", Reason: "more than the limit"}
	}
	return nil
}

// AcquirePermits implements lockx.SemaphoreBackend.
func (b *Backend) AcquirePermits(ctx context.Context, req lockx.PermitRequest) (lockx.Result, error) {
	if err := ctx.Err(); err != nil {
		return lockx.Result{}, err
	}
	if err := checkPermitRequest(req); err != nil {
		return lockx.Result{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	e := b.liveSem(req.Key, now)
	if e == nil {
		e = &semEntry{holders: make(map[lockx.Owner]*semHold)}
		stateOf(b).sems[req.Key] = e
	}
	if h := e.holders[req.Owner]; h != nil {
		h.expires = now.Add(req.Lease)
		return lockx.Result{Acquired: true, Token: h.token, TTL: req.Lease}, nil
	}
	// First come, first served: the requests queued ahead count as taken, so
	// a large request is never overtaken, while the whole prefix of the
	// queue that fits is granted at once rather than one head at a time.
	need := e.inUse() + req.Count
	if req.Fair {
		for _, w := range e.queue {
			if w.owner == req.Owner {
				break
			}
			need += w.count
		}
	}
	fits := need <= req.Limit
	if !fits {
		if req.Wait && req.Fair {
			e.enqueue(req, now)
		}
		res := lockx.Result{TTL: e.soonestExpiry(now)}
		b.liveSem(req.Key, now)
		return res, nil
	}
	e.dequeue(req.Owner)
	b.token++
	e.holders[req.Owner] = &semHold{count: req.Count, token: b.token, expires: now.Add(req.Lease)}
	if len(e.queue) > 0 {
		b.wakeSem(req.Key, e) // the next in line may fit as well
	}
	return lockx.Result{Acquired: true, Token: b.token, TTL: req.Lease}, nil
}

func (e *semEntry) enqueue(req lockx.PermitRequest, now time.Time) {
	qttl := req.QueueTTL
	if qttl <= 0 {
		qttl = lockx.DefaultQueueTTL
	}
	for i := range e.queue {
		if e.queue[i].owner == req.Owner {
			e.queue[i].deadline, e.queue[i].count, e.queue[i].limit = now.Add(qttl), req.Count, req.Limit
			return
		}
	}
	e.queue = append(e.queue, semWaiter{owner: req.Owner, count: req.Count, limit: req.Limit, deadline: now.Add(qttl)})
}

func (e *semEntry) dequeue(owner lockx.Owner) bool {
	for i, w := range e.queue {
		if w.owner == owner {
			e.queue = append(e.queue[:i], e.queue[i+1:]...)
			return true
		}
	}
	return false
}

func (e *semEntry) soonestExpiry(now time.Time) time.Duration {
	var ttl time.Duration
	for _, h := range e.holders {
		if d := h.expires.Sub(now); ttl == 0 || d < ttl {
			ttl = d
		}
	}
	return ttl
}

// ExtendPermits implements lockx.SemaphoreBackend.
func (b *Backend) ExtendPermits(ctx context.Context, key string, owner lockx.Owner, lease time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	e := b.liveSem(key, now)
	if e == nil || e.holders[owner] == nil {
		return lockx.ErrNotHeld
	}
	e.holders[owner].expires = now.Add(lease)
	return nil
}

// ReleasePermits implements lockx.SemaphoreBackend.
func (b *Backend) ReleasePermits(ctx context.Context, key string, owner lockx.Owner) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	e := b.liveSem(key, now)
	if e == nil {
		return lockx.ErrNotHeld
	}
	err := lockx.ErrNotHeld
	if e.holders[owner] != nil {
		delete(e.holders, owner)
		err = nil
	}
	if withdrew := e.dequeue(owner); err == nil || withdrew {
		b.wakeSem(key, e)
	}
	b.liveSem(key, now)
	return err
}

// Permits implements lockx.SemaphoreBackend.
func (b *Backend) Permits(ctx context.Context, key string) (lockx.PermitUsage, error) {
	if err := ctx.Err(); err != nil {
		return lockx.PermitUsage{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.liveSem(key, b.now())
	if e == nil {
		return lockx.PermitUsage{}, nil
	}
	return lockx.PermitUsage{InUse: e.inUse(), Holders: int64(len(e.holders)), Waiting: int64(len(e.queue))}, nil
}

// wakeSem wakes the queued owners whose requests fit, in queue order, up to
// the first that does not; with no one queued, every watcher (non-fair
// waiters do not queue). Callers hold b.mu.
func (b *Backend) wakeSem(key string, e *semEntry) {
	ws := b.watchers[key]
	if ws == nil {
		return
	}
	targets := make(map[lockx.Owner]bool)
	used := e.inUse()
	for _, w := range e.queue {
		if used+w.count > w.limit {
			break
		}
		used += w.count
		targets[w.owner] = true
	}
	all := len(e.queue) == 0
	for w := range ws.m {
		if all || targets[w.owner] {
			select {
			case w.ch <- struct{}{}:
			default:
			}
		}
	}
}
