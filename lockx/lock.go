package lockx

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// Lock is a handle on a held lock. Reentrant acquisitions return further
// handles on the same hold; each handle is released once. All methods are
// safe for concurrent use, and on a nil *Lock they return ErrNotHeld.
type Lock struct {
	h        *hold
	released atomic.Bool
}

// Key returns the lock's key.
func (l *Lock) Key() string {
	if l == nil || l.h == nil {
		return ""
	}
	return l.h.key
}

// Owner returns the owner id the lock is held under.
func (l *Lock) Owner() Owner {
	if l == nil || l.h == nil {
		return ""
	}
	return l.h.owner
}

// Token returns the lock's fencing token. Reentrant handles share it.
func (l *Lock) Token() Token {
	if l == nil || l.h == nil {
		return 0
	}
	return l.h.token
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Lost returns a channel that is closed when the lock's lease is lost
// (renewal failed or was impossible, or an explicit lease ran out). It is
// not closed by Release.
func (l *Lock) Lost() <-chan struct{} {
	if l == nil || l.h == nil {
		return closedChan
	}
	h := l.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lost == nil {
		if h.lostClosed {
			return closedChan
		}
		h.lost = make(chan struct{})
	}
	return h.lost
}

// ValidUntil returns the instant, on this process's (monotonic) clock,
// until which the lock is surely held: the start of the last successful
// grant or renewal plus the lease, less the drift allowance (WithDrift).
// Past it the lock is declared lost — Lost closes, Context is cancelled —
// as soon as the validity timer runs; a holder resuming from a pause (GC,
// SIGSTOP, a suspended VM) can compare time.Now() with ValidUntil before
// acting, without racing that timer. It returns the zero time once the
// hold has ended (released, lost or closed).
func (l *Lock) ValidUntil() time.Time {
	if l == nil || l.h == nil || l.h.isLost() {
		return time.Time{}
	}
	h := l.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.finished {
		return time.Time{}
	}
	return h.validUntil
}

// Context returns a context that carries the lock's owner (so Acquire under
// it re-enters) and is cancelled when the lock is lost (cause ErrLost),
// released (cause ErrReleased) or its client closed (cause ErrClosed). It
// keeps the values, but not the cancellation, of the context given to
// Acquire: a wait timeout does not end the critical section.
func (l *Lock) Context() context.Context {
	if l == nil || l.h == nil {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(ErrNotHeld)
		return ctx
	}
	return l.h.context()
}

// Extend resets the lease to ttl on the backend. With the watchdog on, ttl
// becomes the lease it renews from now on. Extending a lost or released lock
// returns ErrNotHeld.
func (l *Lock) Extend(ctx context.Context, ttl time.Duration) error {
	if l == nil || l.h == nil {
		return ErrNotHeld
	}
	h := l.h
	if ttl <= 0 {
		return keyError("extend", h.key, &ArgError{Arg: "ttl", Reason: "must be positive"})
	}
	if l.released.Load() || h.isLost() {
		return keyError("extend", h.key, ErrNotHeld)
	}
	start := time.Now()
	err := h.ops.Extend(ctx, h.key, h.owner, ttl)
	switch {
	case err == nil:
		h.renewed(start, ttl)
	case isNotHeld(err):
		h.markLost("extend: not held")
	}
	h.observeExtend(ctx, false, start, err)
	return keyError("extend", h.key, err)
}

// TTL returns the lease left on the backend. Pattern grants (read locks,
// permits) report errors.ErrUnsupported.
func (l *Lock) TTL(ctx context.Context) (time.Duration, error) {
	if l == nil || l.h == nil {
		return 0, ErrNotHeld
	}
	if l.released.Load() {
		return 0, keyError("ttl", l.h.key, ErrNotHeld)
	}
	if !l.h.plain {
		return 0, keyError("ttl", l.h.key, errors.ErrUnsupported)
	}
	d, err := l.h.c.b.TTL(ctx, l.h.key, l.h.owner)
	return d, keyError("ttl", l.h.key, err)
}

// Release gives up this handle. The last handle of a hold frees the lock on
// the backend, stops its renewal and cancels its context with ErrReleased.
// Releasing a handle twice returns ErrNotHeld; releasing a lost lock returns
// ErrLost. A release whose reply was lost is retried, and the retry's "not
// held" counts as success, so a lock is never released twice.
func (l *Lock) Release(ctx context.Context) error {
	if l == nil || l.h == nil {
		return ErrNotHeld
	}
	if l.h.observer == nil {
		_, err := l.release(ctx)
		return err
	}
	start := time.Now()
	final, err := l.release(ctx)
	l.observeRelease(ctx, start, final, err)
	return err
}

// observeRelease reports a release that started at start to the hold's
// observer, if it has one.
func (l *Lock) observeRelease(ctx context.Context, start time.Time, final bool, err error) {
	h := l.h
	o := h.observer
	if o == nil {
		return
	}
	if ctx == nil {
		ctx = context.Background()
	}
	o.Released(ctx, ReleaseEvent{
		Kind: h.hk.kind, Key: h.key, Backend: h.c.name, Token: h.token,
		Final: final, Status: StatusOf(err), Err: err,
		Start: start, Duration: time.Since(start),
	})
}

// release is Release; final reports that this was the hold's last handle.
func (l *Lock) release(ctx context.Context) (final bool, _ error) {
	r, final, err := l.beginRelease()
	if !final {
		return false, err
	}
	if r.owned {
		leave := r.enterGate(ctx)
		defer leave()
		err = r.releaseKey(ctx)
	}
	return true, r.finish(err)
}

// finalRelease is the last handle's release of a hold, between
// beginRelease and finish: the backend's release (one key, or a set's in
// one call) goes between the two.
type finalRelease struct {
	h     *hold
	lost  bool // the hold was lost before the release
	owned bool // the key is to be released at the backend
}

// beginRelease gives up l. final is false if l was not the hold's last
// handle (a reentrant hold lives on) or was given up before; err then is
// the release's outcome. Otherwise the hold is finished (its watchdog,
// timers and context ended) and the caller must release the key at the
// backend if r.owned, and then call r.finish.
func (l *Lock) beginRelease() (r finalRelease, final bool, err error) {
	h := l.h
	if !l.released.CompareAndSwap(false, true) {
		return r, false, keyError("release", h.key, ErrNotHeld)
	}
	c := h.c
	c.mu.Lock()
	h.count--
	if h.count > 0 {
		c.mu.Unlock()
		if h.isLost() {
			return r, false, keyError("release", h.key, ErrLost)
		}
		return r, false, nil
	}
	r = finalRelease{h: h, lost: h.isLost()}
	cur := c.holds[h.hk]
	r.owned = cur == h || (cur == nil && !c.closed)
	if cur == h {
		h.releasing = releaseRunning
	}
	c.mu.Unlock()
	h.finish(ErrReleased)
	return r, true, nil
}

// enterGate keeps a same-owner acquisition of an explicit owner's key from
// reaching the backend while its release is in flight (it would be undone
// by it); the gate is only ever held briefly, see Client.acquire. leave
// ends it.
func (r finalRelease) enterGate(ctx context.Context) (leave func()) {
	if r.h.explicit {
		if leave, err := r.h.c.owners.enter(context.WithoutCancel(ctx), ownerGateKey(r.h.hk), true, nil, nil); err == nil {
			return leave
		}
	}
	return func() {}
}

// releaseRunning marks a hold's final release in flight while nobody waits
// for its end: most releases are never waited for, and need no channel of
// their own. It is never closed.
var releaseRunning = make(chan struct{})

// finish ends the release with the backend's outcome err (nil if the key
// was not r.owned) and returns the release's error.
func (r finalRelease) finish(err error) error {
	h, c := r.h, r.h.c
	c.mu.Lock()
	gate := h.takeGate()
	if c.holds[h.hk] == h {
		delete(c.holds, h.hk)
	}
	if h.releasing != nil && h.releasing != releaseRunning {
		close(h.releasing)
	}
	c.mu.Unlock()
	if gate != nil {
		c.gates.leave(gate)
	}
	if r.lost && (err == nil || isNotHeld(err)) {
		err = ErrLost
	}
	if !r.lost {
		h.observeEnd(StatusOK, "")
	}
	return keyError("release", h.key, err)
}

// releaseWithRetry retries a release whose outcome is unknown; a "not held"
// after an unknown outcome means the first attempt went through.
func releaseWithRetry(ctx context.Context, release func(context.Context, string, Owner) error, key string, owner Owner) error {
	return retryRelease(ctx, release, key, owner, release(ctx, key, owner))
}

// retryRelease goes on from a first release attempt whose outcome was err,
// as releaseWithRetry: up to two more attempts while the outcome is
// unknown.
func retryRelease(ctx context.Context, release func(context.Context, string, Owner) error, key string, owner Owner, err error) error {
	for attempt := 1; ; attempt++ {
		if err == nil || ctx.Err() != nil {
			return err
		}
		if isNotHeld(err) {
			if attempt > 1 {
				return nil
			}
			return err
		}
		if attempt == 3 {
			return err
		}
		t := time.NewTimer(time.Duration(attempt) * 10 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
		err = release(ctx, key, owner)
	}
}
