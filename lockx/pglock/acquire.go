package pglock

import (
	"context"
	"time"

	"github.com/lockx-go/lockx/lockx"
)

// Acquire implements lockx.Backend: one attempt, in one round trip, to take
// the key's advisory lock on a holder session, draw the fencing token from
// the fence sequence and record the holder's row — all in one statement.
//
// Idempotent per owner: a repeated attempt by the holder renews its lease
// and returns the same token. A refusal reports the holder's remaining lease
// when its row says so. With req.Fair the attempt is granted only at the
// head of the key's shared queue (lockx_queue), which the attempt joins or
// refreshes when req.Wait is set; plain attempts yield to live fair waiters.
func (b *Backend) Acquire(ctx context.Context, req lockx.Request) (lockx.Result, error) {
	return b.acquire(ctx, req, false)
}

// AcquireShared is Acquire for a shared (read) lock: any number of owners
// may hold a key shared at once, and none while an exclusive owner holds it.
// Release, Extend, TTL and NotifyLoss apply to shared holds too. Shared
// holds are process-local bookkeeping over one shared advisory lock per key
// and process: they have no row, so another process cannot see or force-
// release them, and they ignore the fair queue (readers may starve a writer;
// the read/write pattern decides how to order them).
//
// It is the internal-facing capability for the read/write lock pattern.
func (b *Backend) AcquireShared(ctx context.Context, req lockx.Request) (lockx.Result, error) {
	return b.acquire(ctx, req, true)
}

func (b *Backend) acquire(ctx context.Context, req lockx.Request, shared bool) (lockx.Result, error) {
	if err := ctx.Err(); err != nil {
		return lockx.Result{}, unavailable("acquire", context.Cause(ctx))
	}
	hash := b.hash(req.Key)
	for attempt := 0; ; attempt++ {
		s, err := b.session(ctx, b.index(hash))
		if err != nil {
			return lockx.Result{}, unavailable("acquire", err)
		}
		res, p, retry, err := b.attempt(ctx, s, hash, req, shared)
		if retry && attempt < 3 {
			continue
		}
		if p == nil || err != nil {
			return res, err
		}
		select {
		case <-p.done:
			return p.res, p.err
		case <-ctx.Done():
			b.mu.Lock()
			if !p.finished {
				p.abandoned = true
				b.mu.Unlock()
				return lockx.Result{}, unavailable("acquire", context.Cause(ctx))
			}
			b.mu.Unlock()
			<-p.done
			return p.res, p.err
		}
	}
}

// attempt decides in process what it can (re-grant, refusal because this
// process holds or is taking the key) and otherwise queues the statement and
// returns its pending state. retry asks for another try with a fresh
// session.
func (b *Backend) attempt(ctx context.Context, s *session, hash int64, req lockx.Request, shared bool) (res lockx.Result, p *pending, retry bool, err error) {
	now := time.Now()
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return res, nil, false, unavailable("acquire", errClosed)
	}
	sl := b.slots[hash]
	if sl != nil {
		switch {
		case sl.excl != nil:
			h := sl.excl
			if !shared && h.key == req.Key && h.owner == req.Owner {
				b.mu.Unlock()
				err := b.extendHold(ctx, h, req.Lease)
				if err == nil {
					return lockx.Result{Acquired: true, Token: h.token, TTL: req.Lease}, nil, false, nil
				}
				return res, nil, isNotHeld(err), err
			}
			ttl := h.remaining(now)
			b.mu.Unlock()
			return b.refuse(ctx, s, hash, req, shared, ttl)
		case len(sl.shared) > 0:
			if !shared || sl.sharedKey != req.Key {
				b.mu.Unlock()
				return b.refuse(ctx, s, hash, req, shared, 0)
			}
			h := sl.shared[req.Owner]
			if h == nil { // join the process's shared lock: no round trip
				h = &hold{hash: hash, key: req.Key, owner: req.Owner, token: sl.sharedTok, shared: true, sess: sl.sess}
				sl.shared[req.Owner] = h
				h.timer = time.AfterFunc(req.Lease, func() { b.expire(h) })
			} else {
				h.timer.Reset(req.Lease)
			}
			h.deadline = now.Add(req.Lease)
			b.mu.Unlock()
			return lockx.Result{Acquired: true, Token: h.token, TTL: req.Lease}, nil, false, nil
		case sl.pending != nil:
			b.mu.Unlock()
			return b.refuse(ctx, s, hash, req, shared, 0)
		}
	} else {
		sl = &slot{}
		b.slots[hash] = sl
	}
	p = &pending{owner: req.Owner, done: make(chan struct{})}
	sl.pending = p
	o := &op{}
	switch {
	case shared:
		o.stmt, o.args = stAcqShared, [][]byte{i8(hash)}
	case req.Fair:
		qttl := req.QueueTTL
		if qttl <= 0 {
			qttl = lockx.DefaultQueueTTL
		}
		o.stmt = stAcquireFair
		o.args = [][]byte{i8(hash), []byte(req.Key), []byte(req.Owner), i8(ms(req.Lease)), boolean(req.Wait), i8(ms(qttl))}
	default:
		o.stmt = stAcquire
		o.args = [][]byte{i8(hash), []byte(req.Key), []byte(req.Owner), i8(ms(req.Lease))}
		o.group = &groupArgs{kind: groupAcquire, hash: hash, key: []byte(req.Key), owner: []byte(req.Owner), leaseMS: ms(req.Lease)}
	}
	o.fin = func(r result) { b.granted(s, sl, p, hash, req, shared, now, r) }
	if !s.enqueue(o) {
		sl.pending = nil
		b.dropIfEmpty(hash, sl)
		b.mu.Unlock()
		return res, nil, true, unavailable("acquire", errSessionLost)
	}
	b.mu.Unlock()
	return res, p, false, nil
}

// refuse answers an attempt this process refuses by itself. A fair waiter
// still joins (or refreshes its place in) the shared queue, so that order
// holds across processes.
func (b *Backend) refuse(ctx context.Context, s *session, hash int64, req lockx.Request, shared bool, ttl time.Duration) (lockx.Result, *pending, bool, error) {
	if shared || !req.Fair || !req.Wait {
		return lockx.Result{TTL: ttl}, nil, false, nil
	}
	qttl := req.QueueTTL
	if qttl <= 0 {
		qttl = lockx.DefaultQueueTTL
	}
	ch := make(chan result, 1)
	o := &op{stmt: stEnqueue, args: [][]byte{i8(hash), []byte(req.Owner), i8(ms(qttl))}, fin: func(r result) { ch <- r }}
	if !s.enqueue(o) {
		return lockx.Result{}, nil, true, unavailable("acquire", errSessionLost)
	}
	select {
	case r := <-ch:
		if r.err != nil {
			return lockx.Result{}, nil, false, unavailable("acquire", usageError(r.err, b.names))
		}
	case <-ctx.Done():
		return lockx.Result{}, nil, false, unavailable("acquire", context.Cause(ctx))
	}
	return lockx.Result{TTL: ttl}, nil, false, nil
}

// granted records the outcome of an acquisition statement. It runs on the
// session's goroutine, so the state is right whether or not the caller is
// still waiting.
func (b *Backend) granted(s *session, sl *slot, p *pending, hash int64, req lockx.Request, shared bool, start time.Time, r result) {
	b.mu.Lock()
	p.finished = true
	if sl.pending == p {
		sl.pending = nil
	}
	switch {
	case r.err != nil:
		p.err = unavailable("acquire", usageError(r.err, b.names))
		if !s.isDead() && !b.closed {
			b.cleanupFailedGrant(s, sl, hash, shared)
		}
		b.wakeLocked(hash, "") // local waiters refused because of us retry
	case r.isNull(0):
		p.res = lockx.Result{TTL: time.Duration(r.val(1)) * time.Millisecond}
	case p.abandoned || b.closed || s.isDead():
		// Nobody will use this grant (or it died with its session): give
		// it back. Release is owner-checked, so this frees nothing else.
		p.err = unavailable("acquire", errSessionLost)
		if !s.isDead() && !b.closed {
			b.releaseOp(s, hash, req.Owner, shared, nil)
		}
		b.wakeLocked(hash, "")
	default:
		h := &hold{hash: hash, key: req.Key, owner: req.Owner, token: lockx.Token(r.val(0)), shared: shared,
			sess: s, deadline: start.Add(req.Lease)}
		h.timer = time.AfterFunc(req.Lease, func() { b.expire(h) })
		sl.sess = s
		if shared {
			sl.shared = map[lockx.Owner]*hold{req.Owner: h}
			sl.sharedKey, sl.sharedTok = req.Key, h.token
		} else {
			sl.excl = h
		}
		p.res = lockx.Result{Acquired: true, Token: h.token, TTL: req.Lease}
	}
	if b.slots[hash] == sl {
		b.dropIfEmpty(hash, sl)
	}
	b.mu.Unlock()
	close(p.done)
}

// cleanupFailedGrant undoes a grant statement that failed: it may have
// failed after taking the lock. Nobody else in this process holds the hash
// on this session, and the slot stays blocked until the unlock has run, so
// no later acquisition (which a batch may reorder before a plain statement)
// can be counted on the session before it. Callers hold b.mu.
func (b *Backend) cleanupFailedGrant(s *session, sl *slot, hash int64, shared bool) {
	blocker := &pending{done: make(chan struct{}), finished: true}
	close(blocker.done)
	sl.pending = blocker
	stmt := stUnlock
	if shared {
		stmt = stUnlockShared
	}
	ok := s.enqueue(&op{stmt: stmt, args: [][]byte{i8(hash)}, fin: func(r result) {
		if r.err != nil {
			s.kill() // cannot know the lock's state: end the session
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		if sl.pending == blocker {
			sl.pending = nil
			b.dropIfEmpty(hash, sl)
		}
		b.wakeLocked(hash, "")
	}})
	if !ok {
		sl.pending = nil
	}
}
