package zklock

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/lockx-go/lockx/lockx/driver"
)

// cancelGrace is how long a plain waiter's node outlives the end of its
// last wait (Watch's cancel) before it is withdrawn: the Client's next
// attempt follows within microseconds, a waiter that gave up never comes.
const cancelGrace = 250 * time.Millisecond

// Acquire implements driver.Backend: it creates the owner's ephemeral
// sequential node under the key's directory (or finds the one it has) and
// grants the lock if that node is the lowest. A refused waiter keeps its
// node (its place in the queue) and watches only its predecessor.
func (b *Backend) Acquire(ctx context.Context, req driver.Request) (driver.Result, error) {
	if err := checkRequest(req); err != nil {
		return driver.Result{}, err
	}
	e := b.lockEntry(kindLock, req.Key, req.Owner, true)
	defer b.unlockEntry(e)
	return b.acquireQueued(ctx, e, decideExclusive, req)
}

func checkRequest(req driver.Request) error {
	if err := checkKeyOwner(req.Key, req.Owner); err != nil {
		return err
	}
	if req.Lease <= 0 {
		return &driver.ArgError{Arg: "lease", Reason: "must be positive"}
	}
	return nil
}

// Extend implements driver.Backend: it checks that the owner's node still
// exists (a read, served by the connected server) and resets the lease
// timer that deletes the node. While disconnected it returns an error
// matching driver.ErrUnavailable and ErrNoSession.
func (b *Backend) Extend(ctx context.Context, key string, owner driver.Owner, lease time.Duration) error {
	return b.extend(ctx, kindLock, key, owner, lease)
}

func (b *Backend) extend(ctx context.Context, k *kind, key string, owner driver.Owner, lease time.Duration) error {
	if err := checkKeyOwner(key, owner); err != nil {
		return err
	}
	if lease <= 0 {
		return &driver.ArgError{Arg: "lease", Reason: "must be positive"}
	}
	e := b.lockEntry(k, key, owner, false)
	if e == nil {
		return driver.ErrNotHeld
	}
	defer b.unlockEntry(e)
	start := time.Now()
	p, err := b.checkHeld(ctx, e, "extend")
	if err != nil {
		return err
	}
	b.mu.Lock()
	if e.path == p && e.held {
		b.armLocked(e, start.Add(lease))
	}
	b.mu.Unlock()
	return nil
}

// checkHeld verifies that e is held and its node exists; a node found gone
// ends the hold (loss callbacks run) with ErrNotHeld.
func (b *Backend) checkHeld(ctx context.Context, e *entry, op string) (string, error) {
	b.mu.Lock()
	held, p, noSession := e.held, e.path, b.noSessionLocked()
	b.mu.Unlock()
	if !held {
		return "", driver.ErrNotHeld
	}
	if err := ctx.Err(); err != nil {
		return "", driver.Unavailable(op, err)
	}
	if noSession != nil {
		return "", driver.Unavailable(op, noSession)
	}
	ok, _, err := b.conn.Exists(p)
	if err != nil {
		return "", driver.Unavailable(op, err)
	}
	if !ok {
		b.mu.Lock()
		var fire []func()
		if e.path == p {
			fire = b.loseLocked(e, false)
		}
		b.mu.Unlock()
		runAll(fire)
		return "", driver.ErrNotHeld
	}
	return p, nil
}

// TTL implements driver.Backend: the remaining lease of the owner's hold,
// after checking that its node exists.
func (b *Backend) TTL(ctx context.Context, key string, owner driver.Owner) (time.Duration, error) {
	if err := checkKeyOwner(key, owner); err != nil {
		return 0, err
	}
	e := b.lockEntry(kindLock, key, owner, false)
	if e == nil {
		return 0, driver.ErrNotHeld
	}
	defer b.unlockEntry(e)
	if _, err := b.checkHeld(ctx, e, "ttl"); err != nil {
		return 0, err
	}
	b.mu.Lock()
	d := time.Until(e.deadline)
	b.mu.Unlock()
	if d <= 0 {
		return 0, driver.ErrNotHeld
	}
	return d, nil
}

// Release implements driver.Backend: it deletes the owner's node, which
// wakes the next waiter's watch. An owner this Backend knows nothing about
// (another process's, or a create whose reply was lost) is found by its
// name among the key's nodes, so an operator's force-release works from
// anywhere.
func (b *Backend) Release(ctx context.Context, key string, owner driver.Owner) error {
	return b.release(ctx, kindLock, key, owner)
}

func (b *Backend) release(ctx context.Context, k *kind, key string, owner driver.Owner) error {
	if err := checkKeyOwner(key, owner); err != nil {
		return err
	}
	if err := b.noSession(); err != nil {
		return driver.Unavailable("release", err)
	}
	if err := ctx.Err(); err != nil {
		return driver.Unavailable("release", err)
	}
	e := b.lockEntry(k, key, owner, false)
	if e == nil {
		return b.releaseByName(k, b.dirOf(k, key), owner)
	}
	defer b.unlockEntry(e)
	b.mu.Lock()
	p, held := e.path, e.held
	b.mu.Unlock()
	if p == "" {
		err := b.releaseByName(k, e.dir, owner)
		b.mu.Lock()
		if err == nil || errors.Is(err, driver.ErrNotHeld) {
			e.unknown = false
		}
		b.mu.Unlock()
		return err
	}
	err := b.conn.Delete(p, -1)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return driver.Unavailable("release", err)
	}
	if err == nil && k == kindSem {
		b.semReleased(p)
	}
	b.mu.Lock()
	e.held, e.path, e.unknown = false, "", false
	e.loss.Drop()
	e.timer.Stop()
	b.unwatchLocked(e)
	b.mu.Unlock()
	if err != nil || !held {
		return driver.ErrNotHeld
	}
	return nil
}

func (b *Backend) releaseByName(k *kind, dir string, owner driver.Owner) error {
	found, err := b.deleteOwnerNodes(k, dir, owner)
	if err != nil {
		return driver.Unavailable("release", err)
	}
	if !found {
		return driver.ErrNotHeld
	}
	return nil
}

// Watch implements driver.Notifier for every kind of hold on key. The
// channel receives a value when the node the owner waits behind goes (so
// only the next waiter wakes: no herd; a semaphore's waiters wake on any
// change of its holders), when the session comes back after a
// disconnection, and when the owner's place in a queue was lost.
func (b *Backend) Watch(ctx context.Context, key string, owner driver.Owner) (<-chan struct{}, func(), error) {
	if err := checkKeyOwner(key, owner); err != nil {
		return nil, nil, err
	}
	b.mu.Lock()
	w := b.wakes.Add(key, owner)
	b.mu.Unlock()
	var once sync.Once
	cancel := func() {
		once.Do(func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.wakes.Remove(key, w)
			others := false
			b.wakes.Owned(key, owner, func(*wake) { others = true })
			if others {
				return
			}
			// A plain waiter that stops waiting leaves the queue soon (fair
			// and pattern waiters are withdrawn by the Client's Release).
			e := b.entries[entryKey{kindLock.ns, key, owner}]
			if e != nil && !e.held && !e.fair && e.path != "" && !b.closed {
				if at := time.Now().Add(cancelGrace); at.Before(e.deadline) {
					b.armLocked(e, at)
				}
			}
		})
	}
	return w.C(), cancel, nil
}

// NotifyLoss implements driver.LossNotifier: fn runs when the Backend learns
// that owner's hold on key is gone — the session expired, the connection
// stayed down for a quarter of the session timeout, the lease ran out, or
// a renewal found the node deleted.
func (b *Backend) NotifyLoss(key string, owner driver.Owner, fn func()) (stop func()) {
	b.mu.Lock()
	e := b.entries[entryKey{kindLock.ns, key, owner}]
	if e == nil || !e.held {
		b.mu.Unlock()
		b.g.Go(fn)
		return func() {}
	}
	stop = e.loss.Add(&b.mu, fn)
	b.mu.Unlock()
	return stop
}

var (
	_ driver.Backend      = (*Backend)(nil)
	_ driver.Notifier     = (*Backend)(nil)
	_ driver.LossNotifier = (*Backend)(nil)
)
