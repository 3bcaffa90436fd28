package memlock

import (
	"context"
	"runtime"
	"sync"
	"time"
	"weak"

	"github.com/lockx-go/lockx/lockx"
)

var _ lockx.RWBackend = (*Backend)(nil)

// patternState holds a Backend's read/write locks and semaphores, guarded
// by the Backend's mu. It lives beside the Backend rather than in it (see
// stateOf) and, like the lock table, keeps nothing for a free key.
type patternState struct {
	rw   map[string]*rwEntry
	sems map[string]*semEntry
}

// states maps each Backend, weakly, to its patternState; an entry goes away
// with its Backend. A field of Backend would do the same more plainly.
var states = struct {
	mu sync.Mutex
	m  map[weak.Pointer[Backend]]*patternState
}{m: make(map[weak.Pointer[Backend]]*patternState)}

// stateOf returns b's pattern state. Callers hold b.mu.
func stateOf(b *Backend) *patternState {
	wp := weak.Make(b)
	states.mu.Lock()
	defer states.mu.Unlock()
	s := states.m[wp]
	if s == nil {
		s = &patternState{rw: make(map[string]*rwEntry), sems: make(map[string]*semEntry)}
		states.m[wp] = s
		runtime.AddCleanup(b, func(wp weak.Pointer[Backend]) {
			states.mu.Lock()
			delete(states.m, wp)
			states.mu.Unlock()
		}, wp)
	}
	return s
}

type rwEntry struct {
	writer   lockx.Owner
	wExpires time.Time
	readers  map[lockx.Owner]time.Time
	token    lockx.Token // the latest write's token: the readers' epoch
	queue    []rwWaiter
}

type rwWaiter struct {
	owner    lockx.Owner
	mode     lockx.RWMode
	deadline time.Time
}

// liveRW returns key's read/write entry with expired holds and queue entries
// dropped, or nil if nothing is left. Callers hold b.mu.
func (b *Backend) liveRW(key string, now time.Time) *rwEntry {
	st := stateOf(b)
	e := st.rw[key]
	if e == nil {
		return nil
	}
	if e.writer != "" && !now.Before(e.wExpires) {
		e.writer = ""
	}
	for o, exp := range e.readers {
		if !now.Before(exp) {
			delete(e.readers, o)
		}
	}
	q := e.queue[:0]
	for _, w := range e.queue {
		if now.Before(w.deadline) {
			q = append(q, w)
		}
	}
	e.queue = q
	if e.writer == "" && len(e.readers) == 0 && len(e.queue) == 0 {
		delete(st.rw, key)
		return nil
	}
	return e
}

// AcquireRW implements lockx.RWBackend.
func (b *Backend) AcquireRW(ctx context.Context, mode lockx.RWMode, req lockx.Request) (lockx.Result, error) {
	if err := ctx.Err(); err != nil {
		return lockx.Result{}, err
	}
	if mode != lockx.ModeRead && mode != lockx.ModeWrite {
		return lockx.Result{}, &lockx.ArgError{Arg: "mode", Reason: "neither read nor write"}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	e := b.liveRW(req.Key, now)
	if e == nil {
		e = &rwEntry{readers: make(map[lockx.Owner]time.Time)}
		stateOf(b).rw[req.Key] = e
	}
	exp := now.Add(req.Lease)
	if mode == lockx.ModeWrite {
		if e.writer == req.Owner {
			e.wExpires = exp
			return lockx.Result{Acquired: true, Token: e.token, TTL: req.Lease}, nil
		}
		if _, reads := e.readers[req.Owner]; reads {
			return lockx.Result{}, lockx.ErrUpgrade
		}
		free := e.writer == "" && len(e.readers) == 0
		if free && len(e.queue) > 0 && e.queue[0].owner != req.Owner {
			free = false
		}
		if !free {
			if req.Wait {
				e.enqueue(req, mode, now)
			}
			res := lockx.Result{TTL: e.blockerTTL(now)}
			b.liveRW(req.Key, now)
			return res, nil
		}
		e.dequeue(req.Owner)
		b.token++
		e.writer, e.wExpires, e.token = req.Owner, exp, b.token
		return lockx.Result{Acquired: true, Token: e.token, TTL: req.Lease}, nil
	}

	if _, ok := e.readers[req.Owner]; ok {
		e.readers[req.Owner] = exp
		return lockx.Result{Acquired: true, Token: e.token, TTL: req.Lease}, nil
	}
	blocked := e.writer != "" && e.writer != req.Owner
	if !blocked && req.Fair && e.writer != req.Owner {
		for _, w := range e.queue {
			if w.owner == req.Owner {
				break
			}
			if w.mode == lockx.ModeWrite {
				blocked = true // writer preference: a queued writer goes first
				break
			}
		}
	}
	if blocked {
		if req.Wait && req.Fair {
			e.enqueue(req, mode, now)
		}
		res := lockx.Result{TTL: e.blockerTTL(now)}
		b.liveRW(req.Key, now)
		return res, nil
	}
	e.dequeue(req.Owner)
	if e.token == 0 {
		b.token++
		e.token = b.token
	}
	e.readers[req.Owner] = exp
	return lockx.Result{Acquired: true, Token: e.token, TTL: req.Lease}, nil
}

func (e *rwEntry) enqueue(req lockx.Request, mode lockx.RWMode, now time.Time) {
	qttl := req.QueueTTL
	if qttl <= 0 {
		qttl = lockx.DefaultQueueTTL
	}
	for i := range e.queue {
		if e.queue[i].owner == req.Owner {
			e.queue[i].deadline, e.queue[i].mode = now.Add(qttl), mode
			return
		}
	}
	e.queue = append(e.queue, rwWaiter{owner: req.Owner, mode: mode, deadline: now.Add(qttl)})
}

func (e *rwEntry) dequeue(owner lockx.Owner) bool {
	for i, w := range e.queue {
		if w.owner == owner {
			e.queue = append(e.queue[:i], e.queue[i+1:]...)
			return true
		}
	}
	return false
}

// blockerTTL is the remaining lease of the hold that blocks the key soonest
// to expire, a bound for a waiter's backoff.
func (e *rwEntry) blockerTTL(now time.Time) time.Duration {
	if e.writer != "" {
		return e.wExpires.Sub(now)
	}
	var ttl time.Duration
	for _, exp := range e.readers {
		if d := exp.Sub(now); ttl == 0 || d < ttl {
			ttl = d
		}
	}
	return ttl
}

// ExtendRW implements lockx.RWBackend.
func (b *Backend) ExtendRW(ctx context.Context, mode lockx.RWMode, key string, owner lockx.Owner, lease time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	e := b.liveRW(key, now)
	switch {
	case e == nil:
		return lockx.ErrNotHeld
	case mode == lockx.ModeWrite && e.writer == owner:
		e.wExpires = now.Add(lease)
		return nil
	case mode == lockx.ModeRead:
		if _, ok := e.readers[owner]; ok {
			e.readers[owner] = now.Add(lease)
			return nil
		}
	}
	return lockx.ErrNotHeld
}

// ReleaseRW implements lockx.RWBackend.
func (b *Backend) ReleaseRW(ctx context.Context, mode lockx.RWMode, key string, owner lockx.Owner) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	e := b.liveRW(key, now)
	if e == nil {
		return lockx.ErrNotHeld
	}
	err := lockx.ErrNotHeld
	switch {
	case mode == lockx.ModeWrite && e.writer == owner:
		e.writer, err = "", nil
	case mode == lockx.ModeRead:
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
	ws := b.watchers[key]
	if ws == nil {
		return
	}
	targets := make(map[lockx.Owner]bool)
	all := true
	for _, w := range e.queue {
		if w.mode == lockx.ModeWrite {
			all = false
			if len(e.readers) == 0 && len(targets) == 0 {
				targets[w.owner] = true
			}
			break
		}
		targets[w.owner] = true
	}
	for w := range ws.m {
		if all || targets[w.owner] {
			select {
			case w.ch <- struct{}{}:
			default:
			}
		}
	}
}
