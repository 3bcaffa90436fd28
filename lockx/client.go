package lockx

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lockx-go/lockx/lockx/driver"
)

// Client hands out locks from one Backend. It owns the backend, the
// watchdog that renews leases and the in-process bookkeeping for reentrancy;
// create one per backend and share it. A Client is safe for concurrent use.
type Client struct {
	b       driver.Backend
	lockOps driver.GrantOps // the plain lock's operations
	// The backend's optional capabilities, looked up once with driver.As
	// (nil where it has none), so a wrapper that forwards them is as good
	// as the backend itself.
	notifier  driver.Notifier
	batch     driver.BatchExtender
	partition driver.ExtendPartitioner
	loss      driver.LossNotifier
	manyAcq   driver.ManyAcquirer
	manyRel   driver.ManyReleaser
	cfg       config
	name      string // backend type name, for observed events

	mu      sync.Mutex
	holds   map[holdKey]*hold
	closed  bool
	done    chan struct{} // closed by Close
	wd      watchdog
	gates   gates // LocalFirst queues, per key
	owners  gates // serialise backend calls of one explicit owner on one key
	bg      calls // backend calls left running past a wait budget, and withdrawals
	closing sync.Once
}

type holdKey struct {
	grant bool // a pattern grant: never confused with a plain lock of the same kind name
	kind  string
	key   string
	owner Owner
}

// New returns a Client over b. Options set the defaults of every call; an
// invalid option is reported by every call as an *ArgError.
func New(b driver.Backend, opts ...Option) *Client {
	c := &Client{
		b:     b,
		cfg:   defaultConfig(),
		holds: make(map[holdKey]*hold),
		done:  make(chan struct{}),
	}
	if b == nil {
		c.cfg.fail("backend", "nil")
	}
	c.cfg.apply(opts)
	c.lockOps = lockOps(b)
	driver.As(b, &c.notifier)
	if driver.As(b, &c.batch) {
		driver.As(b, &c.partition)
	}
	driver.As(b, &c.loss)
	driver.As(b, &c.manyAcq)
	driver.As(b, &c.manyRel)
	c.name = backendName(b)
	c.wd.init(c)
	c.gates.init()
	c.owners.init()
	return c
}

// Backend returns the backend the client was created with, so patterns can
// discover its capabilities.
func (c *Client) Backend() driver.Backend { return c.b }

// Acquire obtains the lock for key, waiting until it is granted, ctx ends,
// the wait budget (WithWait) is spent or the client is closed. A refusal
// matches ErrNotAcquired; when ctx ended the error also matches ctx's error.
//
// If ctx carries an owner (ContextWithOwner, or a Lock.Context) that already
// holds key on this client, Acquire re-enters: it returns a new handle with
// the same token at no cost, and the lock is freed when every handle is
// released.
func (c *Client) Acquire(ctx context.Context, key string, opts ...Option) (*Lock, error) {
	return c.acquire(ctx, key, &c.lockOps, opts, true)
}

// TryAcquire makes one attempt to obtain the lock for key. It returns an
// error matching ErrNotAcquired at once if another owner holds it (or, with
// Fair, if others are queued for it).
func (c *Client) TryAcquire(ctx context.Context, key string, opts ...Option) (*Lock, error) {
	return c.acquire(ctx, key, &c.lockOps, opts, false)
}

// Do acquires key (waiting as Acquire does), runs fn and releases the lock.
// fn's context is cancelled when the lock is lost or ctx ends, and carries the
// lock (LockFromContext) for its fencing token; if the lock was lost while fn
// ran, Do's error matches ErrLost (joined with fn's error).
func (c *Client) Do(ctx context.Context, key string, fn func(context.Context) error, opts ...Option) error {
	if fn == nil {
		return keyError("do", key, &ArgError{Arg: "fn", Reason: "nil"})
	}
	l, err := c.Acquire(ctx, key, opts...)
	if err != nil {
		return err
	}
	fctx, cancel := context.WithCancelCause(ContextWithLock(l.Context(), l))
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	ferr := fn(fctx)
	stop()
	cancel(nil)
	return errors.Join(ferr, l.Release(context.WithoutCancel(ctx)))
}

// Close releases every lock still held through this client (best effort,
// bounded), cancels their contexts with cause ErrClosed, stops the watchdog,
// wakes waiting Acquire calls with ErrClosed and closes the backend.
// Close is idempotent.
func (c *Client) Close() error {
	var err error
	c.closing.Do(func() {
		c.mu.Lock()
		c.closed = true
		close(c.done)
		holds := make([]*hold, 0, len(c.holds))
		for k, h := range c.holds {
			holds = append(holds, h)
			delete(c.holds, k)
		}
		c.mu.Unlock()
		c.wd.stop()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		for _, h := range holds {
			h.finish(ErrClosed)
			h.observeEnd(StatusClosed, "")
			if !h.isLost() {
				_ = h.ops.Release(ctx, h.key, h.owner)
			}
			h.releaseGate()
		}
		c.bg.wait(2 * time.Second)
		if c.b != nil {
			err = c.b.Close()
		}
	})
	return err
}

func (c *Client) validate(key string, cfg *config) error {
	if cfg.err != nil {
		return cfg.err
	}
	switch {
	case key == "":
		return &ArgError{Arg: "key", Reason: "empty"}
	case len(key) > cfg.maxKeyLen:
		return &ArgError{Arg: "key", Reason: fmt.Sprintf("%d bytes, longer than the maximum %d", len(key), cfg.maxKeyLen)}
	}
	return nil
}

func (c *Client) acquire(ctx context.Context, key string, ops *driver.GrantOps, opts []Option, wait bool) (*Lock, error) {
	op := "acquire"
	if ops != &c.lockOps {
		op = ops.Kind
	}
	cfg := c.callConfig(opts)
	o := cfg.observer
	if o == nil {
		return c.acquireCfg(ctx, key, ops, op, cfg, wait, nil)
	}
	start := time.Now()
	var st acquireStats
	l, err := c.acquireCfg(ctx, key, ops, op, cfg, wait, &st)
	c.observeAcquire(ctx, o, key, ops, cfg, wait, start, &st, l, err)
	return l, err
}

// callConfig returns a call's config: the Client's own, as it is, when the
// call has no options (no code but an Option writes a config, so callers
// only read it), else a copy with opts applied. Only the copy is allocated:
// it escapes, as the Options are functions the compiler cannot see into.
func (c *Client) callConfig(opts []Option) *config {
	if len(opts) == 0 {
		return &c.cfg
	}
	own := c.cfg
	own.apply(opts)
	return &own
}

func (c *Client) acquireCfg(ctx context.Context, key string, ops *driver.GrantOps, op string, cfg *config, wait bool, st *acquireStats) (*Lock, error) {
	plain := ops == &c.lockOps
	if err := c.validate(key, cfg); err != nil {
		return nil, keyError(op, key, err)
	}
	if ctx == nil {
		return nil, keyError(op, key, &ArgError{Arg: "ctx", Reason: "nil"})
	}
	if ops.Acquire == nil || ops.Extend == nil || ops.Release == nil {
		return nil, keyError(op, key, &ArgError{Arg: "ops", Reason: "missing operation"})
	}
	// The wait budget covers every wait of the call: the owner's gate,
	// LocalFirst's gate and every backend call (bounded).
	var budget <-chan time.Time
	var budgetAt time.Time
	if wait && cfg.wait > 0 {
		budgetAt = time.Now().Add(cfg.wait)
		t := time.NewTimer(cfg.wait)
		defer t.Stop()
		budget = t.C
	}
	owner, explicit := OwnerFromContext(ctx)
	explicit = explicit && ops.Reentrant
	hk := holdKey{!plain, ops.Kind, key, owner}
	if explicit {
		// Goroutines sharing an owner reach the backend one at a time, so
		// that one's final release cannot undo another's fresh grant. The
		// gate is held from the attempt to the registration of the hold;
		// later arrivals then re-enter that hold.
		for {
			l, err := c.reenter(ctx, hk, true, budget)
			if l != nil || err != nil {
				if l != nil && st != nil {
					st.reentry = true
				}
				return l, keyError(op, key, err)
			}
			leave, err := c.owners.enter(ctx, ownerGateKey(hk), true, budget, c.done)
			if err != nil {
				return nil, keyError(op, key, err)
			}
			l, err = c.reenter(ctx, hk, false, nil)
			if l != nil || err != nil {
				leave()
				if l != nil && st != nil {
					st.reentry = true
				}
				return l, keyError(op, key, err)
			}
			if c.releasePending(hk) {
				leave() // the release needs the gate: let it finish, then retry
				continue
			}
			defer leave()
			break
		}
	} else {
		owner = NewOwner()
		hk.owner = owner
	}
	if err := c.checkOpen(); err != nil {
		return nil, keyError(op, key, err)
	}

	var gate func()
	if cfg.localFirst && plain {
		var err error
		if gate, err = c.gates.enter(ctx, key, wait, budget, c.done); err != nil {
			return nil, keyError(op, key, err)
		}
	}
	req := driver.Request{Key: key, Owner: owner, Lease: cfg.lease, Fair: cfg.fair, Wait: wait, QueueTTL: cfg.queueTTL, Renewed: cfg.watchdog}
	res, start, err := c.obtain(ctx, ops, req, cfg, budget, budgetAt, st)
	if err != nil {
		if gate != nil {
			gate()
		}
		return nil, keyError(op, key, err)
	}
	l, err := c.register(ctx, ops, hk, explicit, req, res, start, cfg, gate, st)
	return l, keyError(op, key, err)
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

// register records a granted lock, or merges it into a hold the same owner
// gained concurrently (the backend's Acquire is idempotent per owner).
func (c *Client) register(ctx context.Context, ops *driver.GrantOps, k holdKey, explicit bool, req driver.Request, res driver.Result, start time.Time, cfg *config, gate func(), st *acquireStats) (*Lock, error) {
	c.mu.Lock()
	if c.closed { // Close ran while we waited: nobody would renew or release this grant
		c.mu.Unlock()
		if gate != nil {
			gate()
		}
		c.abandon(ops, req)
		return nil, ErrClosed
	}
	if h := c.holds[k]; h != nil && h.releasing == nil && !h.isLost() && h.token == res.Token {
		h.count++
		c.mu.Unlock()
		if gate != nil {
			gate()
		}
		if st != nil {
			st.reentry = true
		}
		return &Lock{h: h}, nil
	}
	h := newHold(c, ops, k, ctx, req, res, start, cfg, gate)
	h.explicit = explicit
	h.plain = ops == &c.lockOps
	c.holds[k] = h
	c.mu.Unlock()
	if st != nil {
		st.newHold = true
	}
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

// obtain runs the attempt loop: register for wake-up, try, and wait for a
// notification, the backoff timer (bounded by the holder's remaining lease)
// or the end of the wait.
func (c *Client) obtain(ctx context.Context, ops *driver.GrantOps, req driver.Request, cfg *config, budget <-chan time.Time, budgetAt time.Time, st *acquireStats) (driver.Result, time.Time, error) {
	bo := newBackoff(cfg.minBackoff, cfg.maxBackoff)
	var lastErr error
	var onWait func() // observes the start of a wait, if observed
	ambiguous := false
	// Pattern holds may queue whatever Request.Fair says: withdraw them too.
	queued := req.Fair || ops != &c.lockOps
	giveUp := func(needed bool) {
		if needed || queued {
			c.abandon(ops, req)
		}
	}
	if cfg.observer != nil && req.Wait {
		waiting := false
		defer func() {
			if waiting {
				observeWait(cfg, ops.Kind, req.Key, -1)
			}
		}()
		onWait = func() {
			if !waiting {
				waiting = true
				observeWait(cfg, ops.Kind, req.Key, +1)
			}
		}
	}
	// The first attempt goes out unwatched, so an uncontended acquisition
	// pays nothing for wake-ups. Once refused, the waiter registers for its
	// wake-up and tries again at once: a release between the two attempts
	// finds the second one, a release after it finds the registration.
	watching := false
	for {
		var wake <-chan struct{}
		unwatch := func() {}
		if req.Wait && c.notifier != nil && watching {
			w, cancel, err := c.watch(ctx, req, budgetAt)
			if err == nil {
				wake, unwatch = w, cancel
			}
		}
		start := time.Now()
		if st != nil {
			st.attempts++
			st.lastStart = start
		}
		res, err := c.attempt(ctx, ops, req, budgetAt)
		if err == nil && res.Acquired {
			unwatch()
			if !res.Token.Valid() {
				c.abandon(ops, req)
				return driver.Result{}, start, driver.Unavailable("acquire", fmt.Errorf("backend issued invalid token %d", res.Token))
			}
			return res, start, nil
		}
		if err != nil && (errors.Is(err, driver.ErrUpgrade) || errors.Is(err, ErrInvalidArgument) || errors.Is(err, driver.ErrNoRetry) || errors.Is(err, ErrClosed)) {
			// A verdict, not an unknown outcome: no retry. ErrNoRetry is a
			// wrapper's word that asking again now is pointless (an open
			// circuit breaker: the attempt never reached the backend, and
			// waiting would only pile callers up behind it). A closed
			// backend never grants again.
			unwatch()
			giveUp(req.Wait)
			return driver.Result{}, start, err
		}
		if err != nil {
			ambiguous = true
			lastErr = err
		}
		if ctx.Err() != nil {
			unwatch()
			giveUp(ambiguous)
			return driver.Result{}, start, joinErr(ErrNotAcquired, context.Cause(ctx), lastErr)
		}
		if !req.Wait {
			unwatch()
			if err != nil {
				giveUp(ambiguous)
				return driver.Result{}, start, err
			}
			return driver.Result{}, start, ErrNotAcquired
		}
		if !watching && c.notifier != nil {
			watching = true
			if err == nil {
				continue
			}
		}
		if onWait != nil {
			onWait()
		}
		delay := bo.next()
		if err == nil && res.TTL > 0 && res.TTL+time.Millisecond < delay {
			delay = res.TTL + time.Millisecond
		}
		if q := req.QueueTTL / 3; queued && q > 0 && delay > q {
			delay = q // refresh the queue entry before it lapses
		}
		t := time.NewTimer(delay)
		select {
		case <-wake:
		case <-t.C:
		case <-ctx.Done():
		case <-budget:
			t.Stop()
			unwatch()
			giveUp(true)
			return driver.Result{}, start, joinErr(ErrNotAcquired, nil, lastErr)
		case <-c.done:
			t.Stop()
			unwatch()
			giveUp(ambiguous)
			return driver.Result{}, start, joinErr(ErrNotAcquired, ErrClosed, nil)
		}
		t.Stop()
		unwatch()
	}
}

// watch registers for req's wake-up. Setting up the registration (a
// subscription) may take a while when the backend is slow or down; it is
// bounded by the wait budget as well as by ctx.
func (c *Client) watch(ctx context.Context, req driver.Request, budgetAt time.Time) (<-chan struct{}, func(), error) {
	type watched struct {
		wake   <-chan struct{}
		cancel func()
		err    error
	}
	w, gaveUp := bounded(c, ctx, budgetAt, func(ctx context.Context) watched {
		wake, cancel, err := c.notifier.Watch(ctx, req.Key, req.Owner)
		return watched{wake, cancel, err}
	}, func(w watched) {
		if w.err == nil {
			w.cancel()
		}
	})
	if gaveUp != nil {
		return nil, nil, gaveUp
	}
	if budgetCut(ctx, budgetAt, w.err) {
		return nil, nil, errBudget
	}
	return w.wake, w.cancel, w.err
}

func joinErr(verdict, cause, last error) error {
	switch {
	case cause != nil && last != nil:
		return fmt.Errorf("%w: %w (last error: %w)", verdict, cause, last)
	case cause != nil:
		return fmt.Errorf("%w: %w", verdict, cause)
	case last != nil:
		return fmt.Errorf("%w: last error: %w", verdict, last)
	}
	return verdict
}
