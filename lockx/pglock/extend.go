package pglock

import (
	"context"
	"errors"
	"time"

	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/internal/backendkit"
)

// Extend implements lockx.Backend. For the holder's Backend it is one
// statement on the holder session that renews the row's lease; it doubles as
// that session's health check. It returns ErrNotHeld once the lock is gone:
// released, its lease run out, force-released through another Backend, or
// lost with its session.
func (b *Backend) Extend(ctx context.Context, key string, owner driver.Owner, lease time.Duration) error {
	if h := b.localHold(b.hash(key), key, owner); h != nil {
		return b.extendHold(ctx, h, lease)
	}
	return b.remote(ctx, "extend", stRemoteExtend, key, owner, lease)
}

// ExtendMany implements lockx.BatchExtender: the renewals of every session
// are queued together and so travel in one pipeline per session.
func (b *Backend) ExtendMany(ctx context.Context, reqs []driver.ExtendRequest) []error {
	errs := make([]error, len(reqs))
	waits := make([]*renewal, len(reqs))
	for i, r := range reqs {
		if h := b.localHold(b.hash(r.Key), r.Key, r.Owner); h != nil {
			e := b.startExtend(h, r.Lease)
			waits[i] = &e
		}
	}
	for i, r := range reqs {
		if waits[i] != nil {
			errs[i] = waits[i].wait()
		} else {
			errs[i] = b.remote(ctx, "extend", stRemoteExtend, r.Key, r.Owner, r.Lease)
		}
	}
	return errs
}

// TTL implements lockx.Backend. The holder's Backend answers from memory.
func (b *Backend) TTL(ctx context.Context, key string, owner driver.Owner) (time.Duration, error) {
	if h := b.localHold(b.hash(key), key, owner); h != nil {
		b.mu.Lock()
		d, gone := h.remaining(time.Now()), h.gone
		b.mu.Unlock()
		if gone || d <= 0 {
			return 0, driver.ErrNotHeld
		}
		return d, nil
	}
	var ttl time.Duration
	hash := b.hash(key)
	try := func() (bool, error) {
		r, err := b.remoteCall(ctx, "ttl", hash, stRemoteTTL, [][]byte{i8(hash), []byte(owner), []byte(key)})
		if err != nil || r.isNull(0) {
			return false, err
		}
		ttl = time.Duration(r.val(0)) * time.Millisecond
		return true, nil
	}
	found, err := b.checkRemote(ctx, "ttl", key, try)
	if err != nil {
		return 0, err
	}
	if !found {
		return 0, driver.ErrNotHeld
	}
	return ttl, nil
}

// NotifyLoss arranges for fn to run (on its own goroutine) when owner's
// hold of key is lost without a Release: its session died (noticed by the
// health check within about one health interval), its lease ran out, or it
// was found force-released. If owner holds no such lock here, fn runs at
// once. stop cancels the registration.
//
// lockx's Client learns of loss only through Extend; a Client that uses this
// capability learns within the health interval instead of at the next
// renewal (see docs/architecture.md).
func (b *Backend) NotifyLoss(key string, owner driver.Owner, fn func()) (stop func()) {
	h := b.localHold(b.hash(key), key, owner)
	b.mu.Lock()
	defer b.mu.Unlock()
	if h == nil || h.gone {
		b.g.Go(fn)
		return func() {}
	}
	return h.loss.Add(&b.mu, fn)
}

func (b *Backend) localHold(hash int64, key string, owner driver.Owner) *hold {
	b.mu.Lock()
	defer b.mu.Unlock()
	sl := b.slots[hash]
	switch {
	case sl == nil:
		return nil
	case sl.excl != nil && sl.excl.key == key && sl.excl.owner == owner:
		return sl.excl
	case sl.sharedKey == key && sl.shared[owner] != nil:
		return sl.shared[owner]
	}
	return nil
}

func (b *Backend) extendHold(ctx context.Context, h *hold, lease time.Duration) error {
	e := b.startExtend(h, lease)
	if e.ch == nil {
		return e.err
	}
	select {
	case r := <-e.ch:
		return e.finish(r)
	case <-ctx.Done():
		// The renewal still lands or fails on its own; the caller treats
		// the outcome as unknown.
		return backendkit.Ended(ctx, "extend")
	}
}

// renewal is a queued renewal: its result arrives on ch, or err is final.
type renewal struct {
	ch     chan result
	err    error
	finish func(result) error
}

func (e renewal) wait() error {
	if e.ch == nil {
		return e.err
	}
	return e.finish(<-e.ch)
}

// startExtend queues the renewal of h.
func (b *Backend) startExtend(h *hold, lease time.Duration) renewal {
	start := time.Now()
	ch := make(chan result, 1)
	b.mu.Lock()
	if h.gone || !start.Before(h.deadline) {
		b.mu.Unlock()
		return renewal{err: driver.ErrNotHeld}
	}
	if !h.shared && !h.published {
		// The first renewal of a hold whose row is not written yet writes
		// it, with the new lease.
		ok := b.publishOp(h, lease, func(r result) { ch <- r })
		b.mu.Unlock()
		if !ok {
			return renewal{err: driver.ErrNotHeld}
		}
	} else {
		b.mu.Unlock()
		o := &op{fin: func(r result) { ch <- r }}
		if h.shared {
			o.stmt = stPing // shared holds have no row: renewing checks the session
		} else {
			o.stmt, o.args = stExtend, [][]byte{i8(h.hash), []byte(h.owner), i8(ms(lease))}
		}
		if !h.sess.enqueue(o) {
			return renewal{err: driver.ErrNotHeld}
		}
	}
	return renewal{ch: ch, finish: func(r result) error {
		switch {
		case r.err != nil && (h.sess.isDead() || errors.Is(r.err, errSessionLost)):
			return driver.ErrNotHeld // the session died, and its locks with it
		case r.err != nil:
			return backendkit.Unavailable("extend", usageError(r.err, b.names))
		case !h.shared && r.rows == 0:
			b.revoke(h)
			return driver.ErrNotHeld
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		if h.gone {
			return driver.ErrNotHeld
		}
		h.deadline = start.Add(lease)
		h.lease.Reset(time.Until(h.deadline))
		return nil
	}}
}

// remote runs an owner-checked statement through the lock table for a lock
// this Backend does not hold.
func (b *Backend) remote(ctx context.Context, opName, stmt, key string, owner driver.Owner, lease time.Duration) error {
	hash := b.hash(key)
	args := [][]byte{i8(hash), []byte(owner), []byte(key)}
	if stmt == stRemoteExtend {
		args = append(args, i8(ms(lease)))
	}
	found, err := b.checkRemote(ctx, opName, key, func() (bool, error) {
		r, err := b.remoteCall(ctx, opName, hash, stmt, args)
		return err == nil && r.rows > 0, err
	})
	if err != nil {
		return err
	}
	if !found {
		return driver.ErrNotHeld
	}
	return nil
}

// checkRemote runs an owner check through the lock table (try), and again
// while the owner's row may not be written yet (lookAgain).
func (b *Backend) checkRemote(ctx context.Context, opName, key string, try func() (bool, error)) (bool, error) {
	found, err := try()
	if found || err != nil {
		return found, err
	}
	return b.lookAgain(ctx, opName, b.hash(key), try)
}

// remoteCall runs one owner-checked statement on hash's holder session and
// waits for it: a lost session or a failed statement is ErrUnavailable for
// opName.
func (b *Backend) remoteCall(ctx context.Context, opName string, hash int64, stmt string, args [][]byte) (result, error) {
	s, err := b.session(ctx, b.index(hash))
	if err != nil {
		return result{}, backendkit.Unavailable(opName, err)
	}
	r, ok := runStmt(s, stmt, args)
	switch {
	case !ok:
		return result{}, backendkit.Unavailable(opName, errSessionLost)
	case r.err != nil:
		return result{}, backendkit.Unavailable(opName, usageError(r.err, b.names))
	}
	return r, nil
}

func isNotHeld(err error) bool { return errors.Is(err, driver.ErrNotHeld) }
