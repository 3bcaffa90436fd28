package lockx

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// RWMode says which side of a read/write lock an RWBackend call concerns.
type RWMode uint8

// The two sides of a read/write lock.
const (
	// ModeRead is a shared hold: any number of readers at once, no writer.
	ModeRead RWMode = iota + 1
	// ModeWrite is an exclusive hold: one writer, no reader.
	ModeWrite
)

// String returns "read" or "write".
func (m RWMode) String() string {
	switch m {
	case ModeRead:
		return "read"
	case ModeWrite:
		return "write"
	}
	return "invalid"
}

// ErrUpgrade reports an attempt to take the write side of a read/write lock
// by an owner that holds its read side. Upgrading would deadlock as soon as
// two readers tried it, so it is refused at once; release the read lock and
// acquire the write lock instead (and re-check what you read).
var ErrUpgrade = errors.New("lockx: cannot upgrade a read lock to a write lock")

// RWBackend is the optional capability of a Backend that serves read/write
// locks (patterns/rwlock). A read/write key is its own namespace: it does not
// conflict with a plain lock of the same name.
//
// Every hold — each reader and the writer — has its own owner and its own
// lease, so a crashed reader's hold expires on its own and can never block
// writers for longer than its lease.
//
// Grant rules for AcquireRW(mode, req):
//
//   - ModeWrite is granted when no other owner holds the key in either mode
//     and, with waiters queued, req.Owner is at the head of the queue. A
//     refused attempt with req.Wait enqueues req.Owner (refreshing its place
//     for req.QueueTTL), so a waiting writer stops new readers from entering.
//     An owner that holds the read side gets ErrUpgrade.
//   - ModeRead is granted when no other owner holds the write side and, if
//     req.Fair, no writer is queued ahead of req.Owner (writer preference;
//     readers queued ahead of a writer still go first). Without req.Fair a
//     reader only waits for a writer that holds the key (reader preference).
//     An owner that holds the write side is granted the read side too
//     (downgrade: take read, then release write).
//
// Both are idempotent per (mode, owner): a repeat attempt by a holder resets
// its lease and returns the same token.
//
// Tokens: a write grant returns a new fencing token, strictly greater than
// every token issued earlier for the key in either mode. A read grant returns
// the key's read epoch: the token of the latest write while the key is in
// use, or a fresh token (greater than every earlier one) once the key has
// been idle. Readers of one epoch share it; it is at least the token of every
// write that completed before the reader entered, and no writer with a
// greater token can be granted while the reader holds.
//
// A Backend that also implements Notifier wakes waiters of a read/write key
// through Watch on the same key string: a release wakes the waiters that can
// now be granted (every reader queued before the next writer, or that writer),
// not every watcher.
type RWBackend interface {
	// AcquireRW makes one attempt to grant mode on req.Key to req.Owner for
	// req.Lease. A refusal is Result{Acquired: false} with TTL set to the
	// blocking holder's remaining lease when known.
	AcquireRW(ctx context.Context, mode RWMode, req Request) (Result, error)
	// ExtendRW resets owner's mode hold on key to lease, or returns ErrNotHeld.
	ExtendRW(ctx context.Context, mode RWMode, key string, owner Owner, lease time.Duration) error
	// ReleaseRW frees owner's mode hold on key and withdraws owner from the
	// key's queue. It returns ErrNotHeld if owner held no such hold.
	ReleaseRW(ctx context.Context, mode RWMode, key string, owner Owner) error
}

// The rest of this file is the front-end machinery shared by the pattern
// capabilities (read/write locks, semaphore permits): a Grant is their
// counterpart of Lock, with the same waiting, lease, renewal and loss
// semantics, over backend operations the pattern supplies.

// GrantOps are the backend operations behind one kind of Grant. Pattern
// packages build them from a capability interface (RWBackend,
// SemaphoreBackend); users of those packages never see them.
type GrantOps struct {
	// Kind names the kind of hold, e.g. "rlock" or "permit". It prefixes
	// errors and separates kinds for reentrancy.
	Kind string
	// Reentrant makes an acquisition under a context whose owner already
	// holds a live Grant of this Kind and key on the same Client return a
	// new handle on that hold, as Client.Acquire does. Otherwise every
	// acquisition gets a fresh owner, whatever the context carries.
	Reentrant bool
	// Acquire makes one attempt; see Backend.Acquire for its contract.
	// A returned error matching ErrUpgrade or ErrInvalidArgument is a final
	// verdict; any other error is an unknown outcome and is retried.
	Acquire func(ctx context.Context, req Request) (Result, error)
	// Extend resets owner's lease, or returns ErrNotHeld.
	Extend func(ctx context.Context, key string, owner Owner, lease time.Duration) error
	// Release frees owner's hold and withdraws owner from any queue, or
	// returns ErrNotHeld.
	Release func(ctx context.Context, key string, owner Owner) error
}

// AcquireGrant obtains a grant of key through ops, waiting for it as
// Acquire waits for a lock: with wake-ups from a Notifier backend (Watch on
// key), the backoff, the wait budget and the client's lifetime. The options
// are the client's: WithLease / WithWatchdog, WithWait, WithQueueTTL,
// WithBackoff, WithDrift, WithLogger, WithMaxKeyLen (LocalFirst and Fair are
// up to the pattern, which sets Request.Fair in ops.Acquire).
//
// While the client is open each Grant has its own renewer, which keeps a
// watchdog lease alive and signals loss through Lost and Context exactly as
// for a Lock.
func (c *Client) AcquireGrant(ctx context.Context, key string, ops GrantOps, opts ...Option) (*Grant, error) {
	return c.acquireGrant(ctx, key, ops, opts, true)
}

// TryAcquireGrant makes one attempt at a grant of key through ops; a refusal
// matches ErrNotAcquired.
func (c *Client) TryAcquireGrant(ctx context.Context, key string, ops GrantOps, opts ...Option) (*Grant, error) {
	return c.acquireGrant(ctx, key, ops, opts, false)
}

// Grant is a handle on a pattern hold — a read or write hold of a read/write
// lock, or a semaphore permit — with the shape of Lock: Key, Owner, Token,
// Lost, Context, Extend and Release. All methods are safe for concurrent use
// and return ErrNotHeld on a nil *Grant.
type Grant struct {
	h        *grantHold
	released atomic.Bool
}

type grantKey struct {
	c     *Client
	kind  string
	key   string
	owner Owner
}

// grants is the registry of live reentrant grants, so that an owner's
// second acquisition re-enters instead of sharing a backend hold unawares.
// Entries are removed when their hold ends; nothing outlives a hold.
var grants = struct {
	mu sync.Mutex
	m  map[grantKey]*grantHold
}{m: make(map[grantKey]*grantHold)}

type grantHold struct {
	c        *Client
	ops      GrantOps
	gk       grantKey
	token    Token
	watchdog bool
	cfg      config

	ctx      context.Context
	cancel   context.CancelCauseFunc
	lost     chan struct{}
	lostFlag atomic.Bool
	quit     chan struct{} // closed once by end: stops the renewer
	ending   sync.Once
	kick     chan struct{} // the lease changed: recompute the renewer's timer
	base     context.Context
	stopBase context.CancelFunc // cancels in-flight renewals

	// guarded by grants.mu
	count     int
	releasing chan struct{}
	closed    bool // the client's Close released it

	mu         sync.Mutex
	lease      time.Duration
	validUntil time.Time
	nextRenew  time.Time
}

func (c *Client) acquireGrant(ctx context.Context, key string, ops GrantOps, opts []Option, wait bool) (*Grant, error) {
	op := ops.Kind
	if op == "" {
		op = "grant"
	}
	cfg := c.cfg
	cfg.apply(opts)
	if err := c.validate(key, &cfg); err != nil {
		return nil, keyError(op, key, err)
	}
	if ctx == nil {
		return nil, keyError(op, key, &ArgError{Arg: "ctx", Reason: "nil"})
	}
	if ops.Acquire == nil || ops.Extend == nil || ops.Release == nil {
		return nil, keyError(op, key, &ArgError{Arg: "ops", Reason: "missing operation"})
	}
	owner, explicit := OwnerFromContext(ctx)
	if explicit && ops.Reentrant {
		g, err := c.reenterGrant(ctx, grantKey{c, ops.Kind, key, owner})
		if g != nil || err != nil {
			return g, keyError(op, key, err)
		}
	} else {
		owner = NewOwner()
	}
	if err := c.checkOpen(); err != nil {
		return nil, keyError(op, key, err)
	}
	var budget <-chan time.Time
	if wait && cfg.wait > 0 {
		t := time.NewTimer(cfg.wait)
		defer t.Stop()
		budget = t.C
	}
	req := Request{Key: key, Owner: owner, Lease: cfg.lease, Wait: wait, QueueTTL: cfg.queueTTL}
	res, start, err := c.obtainGrant(ctx, req, ops, &cfg, budget)
	if err != nil {
		return nil, keyError(op, key, err)
	}
	return c.registerGrant(ctx, req, ops, res, start, &cfg), nil
}

func (c *Client) reenterGrant(ctx context.Context, gk grantKey) (*Grant, error) {
	for {
		grants.mu.Lock()
		h := grants.m[gk]
		if h == nil {
			grants.mu.Unlock()
			return nil, nil
		}
		if h.releasing == nil && !h.isLost() && !h.closed {
			h.count++
			grants.mu.Unlock()
			return &Grant{h: h}, nil
		}
		pending := h.releasing
		grants.mu.Unlock()
		if pending == nil {
			return nil, nil
		}
		select {
		case <-pending:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %w", ErrNotAcquired, context.Cause(ctx))
		}
	}
}

// obtainGrant is Client.obtain over ops: attempt, then wait for a wake-up,
// the backoff (bounded by the blocker's lease and by a third of the queue
// TTL, so a queued waiter keeps its place), the budget or the end.
func (c *Client) obtainGrant(ctx context.Context, req Request, ops GrantOps, cfg *config, budget <-chan time.Time) (Result, time.Time, error) {
	bo := newBackoff(cfg.minBackoff, cfg.maxBackoff)
	var lastErr error
	ambiguous := false
	giveUp := func() {
		actx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = ops.Release(actx, req.Key, req.Owner) // owner-checked: frees only ours
	}
	for {
		var wake <-chan struct{}
		unwatch := func() {}
		if req.Wait && c.notifier != nil {
			if w, cancel, err := c.notifier.Watch(ctx, req.Key, req.Owner); err == nil {
				wake, unwatch = w, cancel
			}
		}
		start := time.Now()
		res, err := ops.Acquire(ctx, req)
		if err == nil && res.Acquired {
			unwatch()
			if !res.Token.valid() {
				giveUp()
				return Result{}, start, Unavailable("acquire", fmt.Errorf("backend issued invalid token %d", res.Token))
			}
			return res, start, nil
		}
		if err != nil && (errors.Is(err, ErrUpgrade) || errors.Is(err, ErrInvalidArgument)) {
			unwatch()
			if req.Wait {
				giveUp() // leave the queue we may have joined earlier
			}
			return Result{}, start, err
		}
		if err != nil {
			ambiguous = true
			lastErr = err
		}
		if ctx.Err() != nil {
			unwatch()
			giveUp()
			return Result{}, start, joinErr(ErrNotAcquired, context.Cause(ctx), lastErr)
		}
		if !req.Wait {
			unwatch()
			if err != nil {
				if ambiguous {
					giveUp()
				}
				return Result{}, start, err
			}
			return Result{}, start, ErrNotAcquired
		}
		delay := bo.next()
		if err == nil && res.TTL > 0 && res.TTL+time.Millisecond < delay {
			delay = res.TTL + time.Millisecond
		}
		if q := req.QueueTTL / 3; q > 0 && delay > q {
			delay = q
		}
		t := time.NewTimer(delay)
		select {
		case <-wake:
		case <-t.C:
		case <-ctx.Done():
		case <-budget:
			t.Stop()
			unwatch()
			giveUp()
			return Result{}, start, joinErr(ErrNotAcquired, nil, lastErr)
		case <-c.done:
			t.Stop()
			unwatch()
			giveUp()
			return Result{}, start, joinErr(ErrNotAcquired, ErrClosed, nil)
		}
		t.Stop()
		unwatch()
	}
}

func (c *Client) registerGrant(ctx context.Context, req Request, ops GrantOps, res Result, start time.Time, cfg *config) *Grant {
	gk := grantKey{c, ops.Kind, req.Key, req.Owner}
	lctx, cancel := context.WithCancelCause(ContextWithOwner(context.WithoutCancel(ctx), req.Owner))
	base, stopBase := context.WithCancel(context.Background())
	lease := req.Lease
	if res.TTL > 0 && res.TTL < lease {
		lease = res.TTL
	}
	h := &grantHold{
		c: c, ops: ops, gk: gk, token: res.Token, watchdog: cfg.watchdog, cfg: *cfg,
		ctx: lctx, cancel: cancel, lost: make(chan struct{}), quit: make(chan struct{}),
		kick: make(chan struct{}, 1), base: base, stopBase: stopBase,
		count: 1, lease: req.Lease,
	}
	h.validUntil = start.Add(lease - cfg.drift(lease))
	h.nextRenew = start.Add(lease / 3)
	if ops.Reentrant {
		grants.mu.Lock()
		if cur := grants.m[gk]; cur != nil && cur.releasing == nil && !cur.isLost() && !cur.closed && cur.token == res.Token {
			// The same owner gained the same hold concurrently: share it.
			cur.count++
			grants.mu.Unlock()
			stopBase()
			cancel(nil)
			return &Grant{h: cur}
		}
		grants.m[gk] = h
		grants.mu.Unlock()
	}
	go h.run()
	return &Grant{h: h}
}

// run is the hold's renewer. It ends when the hold ends (release, loss) or
// the client closes, whichever comes first.
func (h *grantHold) run() {
	t := time.NewTimer(h.untilNext(time.Now()))
	defer t.Stop()
	for {
		select {
		case <-h.quit:
			return
		case <-h.c.done:
			h.closeByClient()
			return
		case <-h.kick:
		case <-t.C:
		}
		now := time.Now()
		h.mu.Lock()
		valid, next, lease := h.validUntil, h.nextRenew, h.lease
		h.mu.Unlock()
		if !now.Before(valid) {
			h.markLost("lease expired locally before renewal")
			return
		}
		if h.watchdog && !now.Before(next) {
			h.renew(lease, valid)
		}
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		t.Reset(h.untilNext(time.Now()))
	}
}

func (h *grantHold) untilNext(now time.Time) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	at := h.validUntil
	if h.watchdog && h.nextRenew.Before(at) {
		at = h.nextRenew
	}
	return max(at.Sub(now), 0)
}

func (h *grantHold) renew(lease time.Duration, valid time.Time) {
	ctx, cancel := context.WithDeadline(h.base, valid)
	defer cancel()
	start := time.Now()
	err := h.ops.Extend(ctx, h.gk.key, h.gk.owner, lease)
	switch {
	case err == nil:
		h.renewed(start, lease)
	case isNotHeld(err):
		h.markLost("renewal: not held")
	default:
		h.mu.Lock()
		h.nextRenew = time.Now().Add(min(h.lease/10, time.Second))
		h.mu.Unlock()
		if l := h.cfg.logger; l != nil {
			l.Warn("lockx: lease renewal failed", "kind", h.ops.Kind, "key", h.gk.key, "err", err)
		}
	}
}

func (h *grantHold) renewed(start time.Time, lease time.Duration) {
	h.mu.Lock()
	h.lease = lease
	h.validUntil = start.Add(lease - h.cfg.drift(lease))
	h.nextRenew = start.Add(lease / 3)
	h.mu.Unlock()
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

func (h *grantHold) isLost() bool { return h.lostFlag.Load() }

// end stops the renewer and in-flight renewals and cancels the context.
func (h *grantHold) end(cause error) {
	h.ending.Do(func() {
		close(h.quit)
		h.stopBase()
		h.cancel(cause)
	})
}

func (h *grantHold) unregister() {
	grants.mu.Lock()
	if grants.m[h.gk] == h {
		delete(grants.m, h.gk)
	}
	grants.mu.Unlock()
}

func (h *grantHold) markLost(why string) {
	if !h.lostFlag.CompareAndSwap(false, true) {
		return
	}
	h.end(ErrLost) // before Lost closes, so its watchers see the cause
	close(h.lost)
	h.unregister()
	if l := h.cfg.logger; l != nil {
		l.Warn("lockx: lock lost", "kind", h.ops.Kind, "key", h.gk.key, "token", uint64(h.token), "reason", why)
	}
}

// closeByClient ends the hold because its client closed: its context is
// cancelled with ErrClosed and the hold is freed on the backend.
func (h *grantHold) closeByClient() {
	grants.mu.Lock()
	h.closed = true
	grants.mu.Unlock()
	h.end(ErrClosed)
	h.unregister()
	if !h.isLost() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = h.ops.Release(ctx, h.gk.key, h.gk.owner)
	}
}

// Key returns the grant's key.
func (g *Grant) Key() string {
	if g == nil || g.h == nil {
		return ""
	}
	return g.h.gk.key
}

// Owner returns the owner id the grant is held under.
func (g *Grant) Owner() Owner {
	if g == nil || g.h == nil {
		return ""
	}
	return g.h.gk.owner
}

// Token returns the grant's token; its meaning is the capability's (see
// RWBackend and SemaphoreBackend).
func (g *Grant) Token() Token {
	if g == nil || g.h == nil {
		return 0
	}
	return g.h.token
}

// Lost returns a channel closed when the grant's lease is lost. Release does
// not close it.
func (g *Grant) Lost() <-chan struct{} {
	if g == nil || g.h == nil {
		return closedChan
	}
	return g.h.lost
}

// Context returns a context that carries the grant's owner and is cancelled
// when the grant is lost (cause ErrLost), released (ErrReleased) or its
// client closed (ErrClosed). It keeps the values, not the cancellation, of
// the context the grant was acquired with.
func (g *Grant) Context() context.Context {
	if g == nil || g.h == nil {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(ErrNotHeld)
		return ctx
	}
	return g.h.ctx
}

// Extend resets the lease to ttl on the backend; with the watchdog on, ttl
// becomes the lease it renews from now on. Extending a lost or released
// grant returns ErrNotHeld.
func (g *Grant) Extend(ctx context.Context, ttl time.Duration) error {
	if g == nil || g.h == nil {
		return ErrNotHeld
	}
	h := g.h
	if ttl <= 0 {
		return keyError("extend", h.gk.key, &ArgError{Arg: "ttl", Reason: "must be positive"})
	}
	if g.released.Load() || h.isLost() {
		return keyError("extend", h.gk.key, ErrNotHeld)
	}
	start := time.Now()
	err := h.ops.Extend(ctx, h.gk.key, h.gk.owner, ttl)
	switch {
	case err == nil:
		h.renewed(start, ttl)
	case isNotHeld(err):
		h.markLost("extend: not held")
	}
	return keyError("extend", h.gk.key, err)
}

// Release gives up this handle; the last handle of a hold frees it on the
// backend and cancels its context with ErrReleased. Releasing a handle twice
// returns ErrNotHeld, releasing a lost grant ErrLost.
func (g *Grant) Release(ctx context.Context) error {
	if g == nil || g.h == nil {
		return ErrNotHeld
	}
	h := g.h
	if !g.released.CompareAndSwap(false, true) {
		return keyError("release", h.gk.key, ErrNotHeld)
	}
	grants.mu.Lock()
	h.count--
	if h.count > 0 {
		grants.mu.Unlock()
		if h.isLost() {
			return keyError("release", h.gk.key, ErrLost)
		}
		return nil
	}
	closed := h.closed
	if grants.m[h.gk] == h {
		h.releasing = make(chan struct{})
	}
	grants.mu.Unlock()

	lost := h.isLost()
	h.end(ErrReleased)
	var err error
	if !closed {
		err = retryRelease(ctx, h.ops.Release, h.gk.key, h.gk.owner)
	}
	grants.mu.Lock()
	if grants.m[h.gk] == h {
		delete(grants.m, h.gk)
	}
	if h.releasing != nil {
		close(h.releasing)
	}
	grants.mu.Unlock()
	if lost && (err == nil || isNotHeld(err)) {
		err = ErrLost
	}
	return keyError("release", h.gk.key, err)
}

// retryRelease is releaseWithRetry over a release function.
func retryRelease(ctx context.Context, release func(context.Context, string, Owner) error, key string, owner Owner) error {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		err = release(ctx, key, owner)
		if err == nil || ctx.Err() != nil {
			return err
		}
		if isNotHeld(err) {
			if attempt > 0 {
				return nil
			}
			return err
		}
		t := time.NewTimer(time.Duration(attempt+1) * 10 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
	}
	return err
}
