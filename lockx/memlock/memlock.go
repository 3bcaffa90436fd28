// Package memlock is lockx's in-process backend: the same semantics as the
// network backends — owners, leases, fencing tokens, fair queues, wake-up on
// release — for a single process and for users' own unit tests.
//
//	locks := lockx.New(memlock.New())
//	defer locks.Close()
//
// Tokens come from one counter per Backend, so they are strictly increasing
// for every key, and nothing is kept for a key once it is free. A set of
// keys (Client.AcquireMany) is taken and given back in one call each
// (driver.ManyAcquirer, driver.ManyReleaser).
package memlock

import (
	"context"
	"sync"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/internal/backendkit"
)

// Backend is an in-process driver.Backend. The zero value is not usable; call
// New. A Backend is safe for concurrent use.
type Backend struct {
	mu       sync.Mutex
	locks    map[string]*entry
	watchers backendkit.Registry[string, struct{}] // by key, guarded by mu
	token    driver.Token
	now      func() time.Time

	// Read/write locks and semaphores, guarded by mu like the lock table and
	// made on first use (rwTable, semTable); nothing is kept for a free key.
	rw   map[string]*rwEntry
	sems map[string]*semEntry

	sideMu  sync.Mutex // guards the capability state below, made on first use
	fences  *FenceStore
	results *ResultStore
	stock   *StockStore
}

type entry struct {
	owner   driver.Owner // "" while free but queued
	token   driver.Token
	expires time.Time
	queue   []queued // fair waiters in arrival order
}

type queued struct {
	owner    driver.Owner
	deadline time.Time
}

// wakeOwner wakes owner's watchers of key. Callers hold b.mu.
func (b *Backend) wakeOwner(key string, owner driver.Owner) { b.watchers.WakeOwner(key, owner) }

// wakeEvery wakes every watcher of key. Callers hold b.mu.
func (b *Backend) wakeEvery(key string) { b.watchers.WakeAll(key) }

// New returns an empty in-process backend.
func New() *Backend {
	return &Backend{
		locks: make(map[string]*entry),
		now:   time.Now,
	}
}

var (
	_ driver.Backend  = (*Backend)(nil)
	_ driver.Notifier = (*Backend)(nil)
)

// live returns key's entry with expired holders and queue entries dropped,
// or nil if nothing is left of it. Callers hold b.mu.
func (b *Backend) live(key string, now time.Time) *entry {
	e := b.locks[key]
	if e == nil {
		return nil
	}
	if e.owner != "" && !now.Before(e.expires) {
		e.owner = ""
	}
	q := e.queue[:0]
	for _, w := range e.queue {
		if now.Before(w.deadline) {
			q = append(q, w)
		}
	}
	e.queue = q
	if e.owner == "" && len(e.queue) == 0 {
		delete(b.locks, key)
		return nil
	}
	return e
}

// Acquire implements driver.Backend.
func (b *Backend) Acquire(ctx context.Context, req driver.Request) (driver.Result, error) {
	if err := ctx.Err(); err != nil {
		return driver.Result{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	e := b.live(req.Key, now)
	if e != nil && e.owner == req.Owner {
		return regrant(req, e, now), nil
	}
	if !mayGrant(req, e) {
		if req.Fair && req.Wait {
			e = b.enqueue(req, e, now)
		}
		return driver.Result{TTL: holderTTL(e, now)}, nil
	}
	return b.grant(req, e, now), nil
}

// mayGrant reports whether req may take the lock whose live entry is e (nil:
// free, nobody queued), req's owner not holding it: it is free, and no fair
// waiter is queued ahead — a plain request yields to every live fair
// waiter, a fair one to every one but itself at the head.
func mayGrant(req driver.Request, e *entry) bool {
	switch {
	case e == nil:
		return true
	case e.owner != "":
		return false
	case len(e.queue) == 0:
		return true
	}
	return req.Fair && e.queue[0].owner == req.Owner
}

// holderTTL is the remaining lease of e's holder, 0 if it has none.
func holderTTL(e *entry, now time.Time) time.Duration {
	if e == nil || e.owner == "" {
		return 0
	}
	return e.expires.Sub(now)
}

// regrant is the idempotent re-grant of a lock req's owner holds already
// (live entry e): its lease renewed, its token kept. Callers hold b.mu.
func regrant(req driver.Request, e *entry, now time.Time) driver.Result {
	e.expires = now.Add(req.Lease)
	return driver.Result{Acquired: true, Token: e.token, TTL: req.Lease}
}

// grant gives req the lock whose live entry is e (nil for a new one) with
// the next token. Callers hold b.mu and checked mayGrant.
func (b *Backend) grant(req driver.Request, e *entry, now time.Time) driver.Result {
	if e == nil {
		e = &entry{}
		b.locks[req.Key] = e
	}
	if len(e.queue) > 0 && e.queue[0].owner == req.Owner {
		e.queue = e.queue[1:]
	}
	b.token++
	e.owner, e.token, e.expires = req.Owner, b.token, now.Add(req.Lease)
	return driver.Result{Acquired: true, Token: e.token, TTL: req.Lease}
}

func (b *Backend) enqueue(req driver.Request, e *entry, now time.Time) *entry {
	if e == nil {
		e = &entry{}
		b.locks[req.Key] = e
	}
	qttl := req.QueueTTL
	if qttl <= 0 {
		qttl = lockx.DefaultQueueTTL
	}
	for i := range e.queue {
		if e.queue[i].owner == req.Owner {
			e.queue[i].deadline = now.Add(qttl)
			return e
		}
	}
	e.queue = append(e.queue, queued{owner: req.Owner, deadline: now.Add(qttl)})
	return e
}

// Extend implements driver.Backend.
func (b *Backend) Extend(ctx context.Context, key string, owner driver.Owner, lease time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	e := b.live(key, now)
	if e == nil || e.owner != owner {
		return driver.ErrNotHeld
	}
	e.expires = now.Add(lease)
	return nil
}

// Release implements driver.Backend.
func (b *Backend) Release(ctx context.Context, key string, owner driver.Owner) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.release(key, owner, b.now())
}

// release is Release under b.mu.
func (b *Backend) release(key string, owner driver.Owner, now time.Time) error {
	e := b.live(key, now)
	if e == nil {
		return driver.ErrNotHeld
	}
	if e.owner != owner {
		for i, w := range e.queue {
			if w.owner == owner { // a waiter withdrawing
				e.queue = append(e.queue[:i], e.queue[i+1:]...)
				if i == 0 && e.owner == "" {
					b.wake(key, e)
				}
				b.live(key, now)
				break
			}
		}
		return driver.ErrNotHeld
	}
	e.owner = ""
	b.wake(key, e)
	b.live(key, now)
	return nil
}

// wake notifies the head of the fair queue, or every watcher of key when no
// one is queued. Callers hold b.mu.
func (b *Backend) wake(key string, e *entry) {
	if len(e.queue) > 0 {
		b.wakeOwner(key, e.queue[0].owner)
		return
	}
	b.wakeEvery(key)
}

// TTL implements driver.Backend.
func (b *Backend) TTL(ctx context.Context, key string, owner driver.Owner) (time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	e := b.live(key, now)
	if e == nil || e.owner != owner {
		return 0, driver.ErrNotHeld
	}
	return e.expires.Sub(now), nil
}

// Watch implements driver.Notifier.
func (b *Backend) Watch(ctx context.Context, key string, owner driver.Owner) (<-chan struct{}, func(), error) {
	b.mu.Lock()
	w := b.watchers.Add(key, owner)
	b.mu.Unlock()
	return w.C(), func() {
		b.mu.Lock()
		b.watchers.Remove(key, w)
		b.mu.Unlock()
	}, nil
}

// Close implements driver.Backend. It keeps the state: locks held in the
// backend outlive a Client closed over it, as they would on a server.
func (b *Backend) Close() error { return nil }
