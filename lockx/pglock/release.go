package pglock

import (
	"context"
	"time"

	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/internal/backendkit"
)

// Release implements lockx.Backend. The holder's Backend unlocks on its
// session, removes the row and notifies waiting processes (only if some
// process has waiters for the key) in one statement. Any other Backend
// releases by owner through the lock table: a fair waiter withdrawing from
// the queue, or an operator's force-unlock, which the holder's Backend
// notices at its next Extend and reports as ErrNotHeld (so lockx's watchdog
// declares the lock lost). It returns ErrNotHeld if owner neither held the
// key nor waited for it.
func (b *Backend) Release(ctx context.Context, key string, owner driver.Owner) error {
	hash := b.hash(key)
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return backendkit.Unavailable("release", errClosed)
	}
	sl := b.slots[hash]
	var h *hold
	if sl != nil {
		switch {
		case sl.excl != nil && sl.excl.key == key && sl.excl.owner == owner:
			h = sl.excl
			sl.excl = nil
		case sl.shared[owner] != nil && sl.sharedKey == key:
			h = sl.shared[owner]
			delete(sl.shared, owner)
		case sl.pending != nil && sl.pending.owner == owner && !sl.pending.finished:
			// The caller gave up on an attempt still in flight: a late grant
			// is given back as soon as it lands.
			sl.pending.abandoned = true
			b.mu.Unlock()
			return nil
		}
	}
	if h == nil {
		b.mu.Unlock()
		return b.remoteRelease(ctx, hash, key, owner)
	}
	if h.gone {
		b.dropIfEmpty(hash, sl)
		b.mu.Unlock()
		return driver.ErrNotHeld
	}
	h.gone = true
	h.lease.Stop()
	h.stopPublish()
	h.loss.Drop()
	s := h.sess
	var ch chan result
	var drive *op
	if !h.shared || len(sl.shared) == 0 {
		ch = make(chan result, 1)
		o := b.releaseStmt(hash, owner, h.shared, h.published, ch)
		switch {
		case s.waiting && s.claim():
			drive = o
		case !s.enqueue(o):
			ch = nil // the session died: the server freed the lock with it
		}
	}
	b.dropIfEmpty(hash, sl)
	// Local waiters may try at once: their statements queue behind the
	// unlock on the same session. Fair ones wait for the notification that
	// names the queue's head.
	b.wakeReleasedLocked(hash)
	b.mu.Unlock()
	if drive != nil {
		s.drive(drive)
	}
	if ch != nil {
		if r := await(ch); r.err != nil && !s.isDead() {
			// Whether the unlock ran is unknown, and another owner of this
			// process may already have re-taken the key on the session
			// (advisory locks count per session): only ending the session
			// is sure to free the lock without freeing someone else's.
			s.kill()
		}
	}
	return nil
}

// releaseOp queues the statement that frees hash on s: unlock, notify
// waiters if any, and — for a hold whose row was written (published) while
// grants defer their rows — mark the row released. Callers hold b.mu.
func (b *Backend) releaseOp(s *session, hash int64, owner driver.Owner, shared, published bool, ch chan result) bool {
	return s.enqueue(b.releaseStmt(hash, owner, shared, published, ch))
}

// releaseStmt is releaseOp's op.
func (b *Backend) releaseStmt(hash int64, owner driver.Owner, shared, published bool, ch chan result) *op {
	w1, w2 := waitFlag(hash)
	stmt := stRelease
	switch {
	case shared:
		stmt = stRelShared
	case published && b.cfg.publishDelay > 0:
		stmt = stReleasePub
	}
	o := &op{stmt: stmt, args: [][]byte{i8(hash), []byte(owner), i4(w1), i4(w2), []byte(b.names.channel), b.payload(hash)},
		fin: func(r result) {
			if ch != nil {
				ch <- r
			}
		}}
	if stmt == stRelease {
		o.group = &groupArgs{kind: groupRelease, hash: hash, owner: []byte(owner)}
	}
	return o
}

// remoteRelease releases by owner through the lock table.
func (b *Backend) remoteRelease(ctx context.Context, hash int64, key string, owner driver.Owner) error {
	args := [][]byte{i8(hash), []byte(owner), []byte(key), []byte(b.names.channel), b.payload(hash)}
	found, err := b.checkRemote(ctx, "release", key, func() (bool, error) {
		r, err := b.remoteCall(ctx, "release", hash, stRemoteRel, args)
		return err == nil && r.val(1) > 0, err
	})
	if err != nil {
		return err
	}
	if !found {
		return driver.ErrNotHeld
	}
	return nil
}

// expire is a hold's lease timer. Shared holds are process-local and end
// here; exclusive ones are reaped by the server's clock, which also sees
// extensions made through another Backend.
func (b *Backend) expire(h *hold) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.dueLocked(h) {
		return
	}
	sl := b.slots[h.hash]
	if h.shared {
		b.lose(h)
		if sl != nil && sl.shared[h.owner] == h {
			delete(sl.shared, h.owner)
			if len(sl.shared) == 0 {
				b.releaseOp(h.sess, h.hash, h.owner, true, false, nil)
			}
			b.dropIfEmpty(h.hash, sl)
		}
		b.wakeLocked(h.hash, "")
		return
	}
	h.reaping = true
	w1, w2 := waitFlag(h.hash)
	o := &op{stmt: stReap, args: [][]byte{i8(h.hash), []byte(h.owner), i4(w1), i4(w2), []byte(b.names.channel), b.payload(h.hash)}}
	o.fin = func(r result) { b.reaped(h, r) }
	h.sess.enqueue(o) // a dead session reports the hold lost itself
}

func (b *Backend) reaped(h *hold, r result) {
	b.mu.Lock()
	defer b.mu.Unlock()
	h.reaping = false
	if h.gone {
		return
	}
	switch {
	case r.err != nil:
		h.lease.Reset(100 * time.Millisecond) // try again; a dead session is handled by sessionLost
		return
	case r.val(0) > 0: // extended through another Backend
		d := time.Duration(r.val(0)) * time.Millisecond
		h.deadline = time.Now().Add(d)
		h.lease.Reset(d)
		return
	}
	b.lose(h)
	if sl := b.slots[h.hash]; sl != nil && sl.excl == h {
		sl.excl = nil
		b.dropIfEmpty(h.hash, sl)
	}
	b.wakeLocked(h.hash, "")
}

// revoke ends a hold whose row is gone (force-released, or its lease ran
// out by the server's clock): the advisory lock is freed at once so waiters
// need not wait for anything else.
func (b *Backend) revoke(h *hold) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if h.gone {
		return
	}
	b.lose(h)
	if sl := b.slots[h.hash]; sl != nil && sl.excl == h {
		sl.excl = nil
		b.dropIfEmpty(h.hash, sl)
	}
	b.releaseOp(h.sess, h.hash, h.owner, false, false, nil) // its row is gone or marked released
	b.wakeLocked(h.hash, "")
}

// kill has a session whose state can no longer be trusted closed by its own
// goroutine; the server frees its locks and the Backend reports them lost.
func (s *session) kill() {
	s.mu.Lock()
	s.killed = true
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}
