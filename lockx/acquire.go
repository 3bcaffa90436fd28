package lockx

import (
	"context"
	"fmt"
	"github.com/lockx-go/lockx/lockx/driver"
	"time"
)

// The acquire path, in the order a call takes it:
//
//	Client.Acquire, TryAcquire, AcquireGrant, TryAcquireGrant
//	  acquire            the call's config; reports the call to the Observer
//	  acquisition.run    check, the wait budget, settleOwner, enterGate
//	    obtain           the attempt loop: watch, try, judge, pause
//	      try            driver.GrantOps.Acquire, which for a plain lock is driver.Backend.Acquire,
//	                     bounded by the wait budget (Client.attempt)
//	    register         a new hold (newHold, armValidity, attach) or a merge
//	  → *Lock
//
// Releasing goes back the other way: Lock.Release → release →
// beginRelease, driver.GrantOps.Release (driver.Backend.Release), finalRelease.finish
// (lock.go).

// An acquisition is one acquire call on its way through the Client: what
// was asked, and what the call has taken so far (an owner gate, a
// LocalFirst gate, the grant). It lives on the caller's stack.
type acquisition struct {
	c   *Client
	ops *driver.GrantOps
	cfg *config
	op  string       // names the call in errors: "acquire", or the grant's kind
	st  acquireStats // for the Observer

	req      driver.Request
	hk       holdKey // where the hold goes in the Client's registry
	explicit bool    // the owner came from ctx: same-owner calls may race (settleOwner)

	budget   <-chan time.Time // fires when the wait budget (WithWait) is spent; nil: no budget
	budgetAt time.Time        // when it fires; zero: no budget
	gate     *gate            // the LocalFirst gate; nil if not entered (or left)

	attempts               // obtain's loop
	res      driver.Result // the grant, once obtained
	start    time.Time     // when the granted attempt was sent: the lease runs from there
}

// acquire is every acquire call: Acquire and TryAcquire with c.lockOps,
// AcquireGrant and TryAcquireGrant with a pattern's operations.
func (c *Client) acquire(ctx context.Context, key string, ops *driver.GrantOps, opts []Option, wait bool) (*Lock, error) {
	cfg := c.callConfig(opts)
	a := acquisition{c: c, ops: ops, cfg: cfg, op: "acquire", req: driver.Request{
		Key: key, Lease: cfg.lease, Fair: cfg.fair, Wait: wait, QueueTTL: cfg.queueTTL, Renewed: cfg.watchdog,
	}}
	if !a.plain() {
		a.op = ops.Kind
	}
	o := cfg.observer
	if o == nil {
		l, err := a.run(ctx)
		return l, keyError(a.op, key, err)
	}
	start := time.Now()
	l, err := a.run(ctx)
	err = keyError(a.op, key, err)
	a.observe(ctx, o, start, l, err)
	return l, err
}

// plain reports whether a is a plain lock's acquisition (not a pattern
// grant's).
func (a *acquisition) plain() bool { return a.ops == &a.c.lockOps }

// run takes the lock: the body of every acquire call.
func (a *acquisition) run(ctx context.Context) (*Lock, error) {
	if err := a.check(ctx); err != nil {
		return nil, err
	}
	// The wait budget covers every wait of the call: the owner's gate,
	// LocalFirst's gate and every backend call (bounded).
	if a.req.Wait && a.cfg.wait > 0 {
		a.budgetAt = time.Now().Add(a.cfg.wait)
		t := time.NewTimer(a.cfg.wait)
		defer t.Stop()
		a.budget = t.C
	}
	l, leave, err := a.settleOwner(ctx)
	if l != nil || err != nil {
		return l, err
	}
	defer leave()
	if err := a.c.checkOpen(); err != nil {
		return nil, err
	}
	p, err := a.enterGate(ctx)
	if err != nil {
		return nil, err
	}
	if p.res.Acquired { // passed with the gate by this Client's last holder (pass.go)
		err = a.granted(p.res, p.start)
	} else {
		err = a.obtain(ctx)
	}
	if err != nil {
		a.leaveGate()
		return nil, err
	}
	return a.register(ctx)
}

// check refuses a call that cannot go anywhere.
func (a *acquisition) check(ctx context.Context) error {
	if err := a.c.validate(a.req.Key, a.cfg); err != nil {
		return err
	}
	if ctx == nil {
		return &ArgError{Arg: "ctx", Reason: "nil"}
	}
	if a.ops.Acquire == nil || a.ops.Extend == nil || a.ops.Release == nil {
		return &ArgError{Arg: "ops", Reason: "missing operation"}
	}
	return nil
}

// settleOwner decides whose lock this is. Without an owner in ctx, or for a
// kind that is not reentrant, it is a fresh one, and leave does nothing.
//
// With one, goroutines sharing that owner reach the backend one at a time,
// so that one's final release cannot undo another's fresh grant: the call
// re-enters the hold the owner already has (l), or enters the owner gate
// and keeps it, until leave, from the attempt to the registration of the
// hold; later arrivals then re-enter that hold.
func (a *acquisition) settleOwner(ctx context.Context) (l *Lock, leave func(), err error) {
	owner, explicit := OwnerFromContext(ctx)
	a.explicit = explicit && a.ops.Reentrant
	if !a.explicit {
		owner = NewOwner()
	}
	a.req.Owner = owner
	a.hk = holdKey{!a.plain(), a.ops.Kind, a.req.Key, owner}
	if !a.explicit {
		return nil, noop, nil
	}
	c := a.c
	for {
		if l, err := c.reenter(ctx, a.hk, true, a.budget); l != nil || err != nil {
			return a.reentered(l), nil, err
		}
		leave, err := c.owners.enter(ctx, ownerGateKey(a.hk), true, a.budget, c.done)
		if err != nil {
			return nil, nil, err
		}
		if l, err := c.reenter(ctx, a.hk, false, nil); l != nil || err != nil {
			leave()
			return a.reentered(l), nil, err
		}
		if !c.releasePending(a.hk) {
			return nil, leave, nil
		}
		leave() // the release needs the gate: let it finish, then retry
	}
}

func noop() {}

// reentered notes a re-entry for the Observer and returns l.
func (a *acquisition) reentered(l *Lock) *Lock {
	if l != nil {
		a.st.reentry = true
	}
	return l
}

func ownerGateKey(k holdKey) string {
	g := "l"
	if k.grant {
		g = "g"
	}
	return g + k.kind + "\x00" + string(k.owner) + "\x00" + k.key
}

func (c *Client) checkOpen() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	return nil
}

// reenter returns a new handle on a hold owner already has for key, or nil
// if there is none. With wait, it first waits out a concurrent final release
// of the same hold, until ctx ends or budget (if not nil) fires.
func (c *Client) reenter(ctx context.Context, k holdKey, wait bool, budget <-chan time.Time) (*Lock, error) {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, ErrClosed
		}
		h := c.holds[k]
		if h == nil {
			c.mu.Unlock()
			return nil, nil
		}
		if h.releasing == nil && !h.isLost() {
			h.count++
			c.mu.Unlock()
			return &Lock{h: h}, nil
		}
		if h.releasing == releaseRunning && wait {
			h.releasing = make(chan struct{}) // the release's finish closes it
		}
		pending := h.releasing
		c.mu.Unlock()
		if pending == nil || !wait { // lost: acquire afresh under the same owner
			return nil, nil
		}
		select {
		case <-pending:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %w", ErrNotAcquired, context.Cause(ctx))
		case <-budget:
			return nil, ErrNotAcquired
		}
	}
}

// releasePending reports whether a final release of the hold k is in flight.
func (c *Client) releasePending(k holdKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.holds[k]
	return h != nil && h.releasing != nil
}

// enterGate queues a LocalFirst plain lock behind the other callers of
// this process that want its key, so that one of them at a time contends
// at the backend. With a driver.Passer backend the caller before it in
// line may pass it the lock along with the gate: p.res.Acquired.
func (a *acquisition) enterGate(ctx context.Context) (p passed, err error) {
	if !a.cfg.localFirst || !a.plain() {
		return p, nil
	}
	var owner Owner // "": takes no pass
	if a.c.passer != nil {
		owner = a.req.Owner
	}
	a.gate, p, err = a.c.gates.join(ctx, a.req.Key, a.req.Wait, a.budget, a.c.done, owner, a.req.Lease)
	return p, err
}

// leaveGate leaves the LocalFirst gate, if the call entered one and still
// has it (a new hold takes it over, and leaves it when it ends).
func (a *acquisition) leaveGate() {
	if a.gate != nil {
		a.c.gates.leave(a.gate)
		a.gate = nil
	}
}

// register records the grant as a new hold, or merges it into a hold the
// same owner gained concurrently (the backend's Acquire is idempotent per
// owner), and returns its handle.
func (a *acquisition) register(ctx context.Context) (*Lock, error) {
	c := a.c
	c.mu.Lock()
	if c.closed { // Close ran while we waited: nobody would renew or release this grant
		c.mu.Unlock()
		a.leaveGate()
		c.abandon(a.ops, a.req)
		return nil, ErrClosed
	}
	if h := c.holds[a.hk]; h != nil && h.releasing == nil && !h.isLost() && h.token == a.res.Token {
		h.count++
		c.mu.Unlock()
		a.leaveGate()
		return a.reentered(&Lock{h: h}), nil
	}
	h := newHold(ctx, a)
	c.holds[a.hk] = h
	c.mu.Unlock()
	a.st.newHold = true
	h.armValidity()
	c.attach(h)
	return &h.first, nil
}

// attach arranges a registered hold's loss notification (a LossNotifier
// backend's plain lock) and its renewals.
func (c *Client) attach(h *hold) {
	if c.loss != nil && h.plain {
		stop := c.loss.NotifyLoss(h.key, h.owner, func() { h.markLost("backend reported the lock lost") })
		h.mu.Lock()
		if h.finished { // released before the arrangement was made
			h.mu.Unlock()
			stop()
		} else {
			h.stopLoss = stop
			h.mu.Unlock()
		}
	}
	if h.watchdog {
		c.wd.add(h)
	}
}
