package memlock

import (
	"context"
	"slices"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
)

var _ driver.RWBackend = (*Backend)(nil)

// rwEntry is one read/write lock. Like semEntry it sweeps expired holds and
// queue entries only once one may be due, indexes its queue by owner and
// counts its queued writers, so a decision does not walk every reader.
type rwEntry struct {
	writer   driver.Owner
	wExpires time.Time
	readers  map[driver.Owner]time.Time
	token    driver.Token // the latest write's token: the readers' epoch
	queue    []*rwWaiter
	queued   map[driver.Owner]*rwWaiter
	writers  int // queued writers
	due      due
}

type rwWaiter struct {
	owner    driver.Owner
	mode     driver.RWMode
	deadline time.Time
}

func (w *rwWaiter) ends() time.Time { return w.deadline }

// rwTable returns the Backend's read/write locks, made on first use.
// Callers hold b.mu.
func (b *Backend) rwTable() map[string]*rwEntry {
	if b.rw == nil {
		b.rw = make(map[string]*rwEntry)
	}
	return b.rw
}

// liveRW returns key's read/write entry with expired holds and queue entries
// dropped, or nil if nothing is left. Callers hold b.mu.
func (b *Backend) liveRW(key string, now time.Time) *rwEntry {
	e := b.rw[key]
	if e == nil {
		return nil
	}
	if passed(e.due.holds, now) {
		e.due.holds = time.Time{}
		if e.writer != "" {
			if !now.Before(e.wExpires) {
				e.writer = ""
			} else {
				e.due.hold(e.wExpires)
			}
		}
		for o, exp := range e.readers {
			if !now.Before(exp) {
				delete(e.readers, o)
			} else {
				e.due.hold(exp)
			}
		}
	}
	e.queue = sweepQueue(&e.due, e.queue, now, e.forget)
	if e.writer == "" && len(e.readers) == 0 && len(e.queue) == 0 {
		delete(b.rw, key)
		return nil
	}
	return e
}

// AcquireRW implements driver.RWBackend.
func (b *Backend) AcquireRW(ctx context.Context, mode driver.RWMode, req driver.Request) (driver.Result, error) {
	if err := ctx.Err(); err != nil {
		return driver.Result{}, err
	}
	if mode != driver.ModeRead && mode != driver.ModeWrite {
		return driver.Result{}, &driver.ArgError{Arg: "mode", Reason: "neither read nor write"}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	e := b.liveRW(req.Key, now)
	if e == nil {
		e = &rwEntry{readers: make(map[driver.Owner]time.Time), queued: make(map[driver.Owner]*rwWaiter)}
		b.rwTable()[req.Key] = e
	}
	exp := now.Add(req.Lease)
	if mode == driver.ModeWrite {
		if e.writer == req.Owner {
			e.wExpires = exp
			e.due.hold(exp)
			return driver.Result{Acquired: true, Token: e.token, TTL: req.Lease}, nil
		}
		if _, reads := e.readers[req.Owner]; reads {
			return driver.Result{}, driver.ErrUpgrade
		}
		free := e.writer == "" && len(e.readers) == 0
		if free && len(e.queue) > 0 && e.queue[0].owner != req.Owner {
			free = false
		}
		if !free {
			if req.Wait {
				e.enqueue(req, mode, now)
			}
			res := driver.Result{TTL: e.blockerTTL(now)}
			b.liveRW(req.Key, now)
			return res, nil
		}
		e.dequeue(req.Owner)
		b.token++
		e.writer, e.wExpires, e.token = req.Owner, exp, b.token
		e.due.hold(exp)
		return driver.Result{Acquired: true, Token: e.token, TTL: req.Lease}, nil
	}

	if _, ok := e.readers[req.Owner]; ok {
		e.readers[req.Owner] = exp
		e.due.hold(exp)
		return driver.Result{Acquired: true, Token: e.token, TTL: req.Lease}, nil
	}
	blocked := e.writer != "" && e.writer != req.Owner
	if !blocked && req.Fair && e.writer != req.Owner {
		blocked = e.writerAhead(req.Owner) // writer preference: a queued writer goes first
	}
	if blocked {
		if req.Wait && req.Fair {
			e.enqueue(req, mode, now)
		}
		res := driver.Result{TTL: e.blockerTTL(now)}
		b.liveRW(req.Key, now)
		return res, nil
	}
	e.dequeue(req.Owner)
	if e.token == 0 {
		b.token++
		e.token = b.token
	}
	e.readers[req.Owner] = exp
	e.due.hold(exp)
	return driver.Result{Acquired: true, Token: e.token, TTL: req.Lease}, nil
}

// writerAhead reports whether a writer is queued ahead of owner (anywhere
// in the queue if owner is not queued).
func (e *rwEntry) writerAhead(owner driver.Owner) bool {
	if e.writers == 0 {
		return false
	}
	if e.queued[owner] == nil {
		return true
	}
	for _, w := range e.queue {
		if w.owner == owner {
			return false
		}
		if w.mode == driver.ModeWrite {
			return true
		}
	}
	return false
}

func (e *rwEntry) enqueue(req driver.Request, mode driver.RWMode, now time.Time) {
	qttl := req.QueueTTL
	if qttl <= 0 {
		qttl = lockx.DefaultQueueTTL
	}
	deadline := now.Add(qttl)
	e.due.queued(deadline)
	if w := e.queued[req.Owner]; w != nil {
		if w.mode == driver.ModeWrite {
			e.writers--
		}
		if mode == driver.ModeWrite {
			e.writers++
		}
		w.deadline, w.mode = deadline, mode
		return
	}
	w := &rwWaiter{owner: req.Owner, mode: mode, deadline: deadline}
	e.queue = append(e.queue, w)
	e.queued[req.Owner] = w
	if mode == driver.ModeWrite {
		e.writers++
	}
}

// forget drops w from the queue's index and counts; the caller removes it
// from the queue itself.
func (e *rwEntry) forget(w *rwWaiter) {
	delete(e.queued, w.owner)
	if w.mode == driver.ModeWrite {
		e.writers--
	}
}

func (e *rwEntry) dequeue(owner driver.Owner) bool {
	w := e.queued[owner]
	if w == nil {
		return false
	}
	e.forget(w)
	if i := slices.Index(e.queue, w); i >= 0 {
		e.queue = slices.Delete(e.queue, i, i+1)
	}
	return true
}

// blockerTTL bounds a waiter's backoff: the remaining lease of the writer
// holding the key, or the time until the earliest reader's lease may end.
func (e *rwEntry) blockerTTL(now time.Time) time.Duration {
	if e.writer != "" {
		return e.wExpires.Sub(now)
	}
	return left(e.due.holds, now)
}

// ExtendRW implements driver.RWBackend.
func (b *Backend) ExtendRW(ctx context.Context, mode driver.RWMode, key string, owner driver.Owner, lease time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	e := b.liveRW(key, now)
	switch {
	case e == nil:
		return driver.ErrNotHeld
	case mode == driver.ModeWrite && e.writer == owner:
		e.wExpires = now.Add(lease)
		e.due.hold(e.wExpires)
		return nil
	case mode == driver.ModeRead:
		if _, ok := e.readers[owner]; ok {
			e.readers[owner] = now.Add(lease)
			e.due.hold(e.readers[owner])
			return nil
		}
	}
	return driver.ErrNotHeld
}

// ReleaseRW implements driver.RWBackend.
func (b *Backend) ReleaseRW(ctx context.Context, mode driver.RWMode, key string, owner driver.Owner) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	e := b.liveRW(key, now)
	if e == nil {
		return driver.ErrNotHeld
	}
	err := driver.ErrNotHeld
	switch {
	case mode == driver.ModeWrite && e.writer == owner:
		e.writer, err = "", nil
	case mode == driver.ModeRead:
		if _, ok := e.readers[owner]; ok {
			delete(e.readers, owner)
			err = nil
		}
	}
	withdrew := e.dequeue(owner)
	if err == nil || withdrew {
		b.wakeRW(key, e)
	}
	b.liveRW(key, now)
	return err
}

// wakeRW wakes the waiters that may now be granted: the readers queued
// before the first queued writer, or that writer if the key is free; with no
// writer queued, every watcher (reader-preference readers do not queue).
// Callers hold b.mu.
func (b *Backend) wakeRW(key string, e *rwEntry) {
	if e.writer != "" {
		return
	}
	if e.writers == 0 {
		b.wakeEvery(key)
		return
	}
	for i, w := range e.queue {
		if w.mode == driver.ModeWrite {
			if i == 0 && len(e.readers) == 0 {
				b.wakeOwner(key, w.owner)
			}
			return
		}
		b.wakeOwner(key, w.owner)
	}
}
