package lockx

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockx-go/lockx/lockx/driver"
)

// Lock is a handle on a held lock. Reentrant acquisitions return further
// handles on the same hold; each handle is released once. All methods are
// safe for concurrent use, and on a nil *Lock they return ErrNotHeld.
type Lock struct {
	h        *hold
	released atomic.Bool
}

// hold is the shared state of one grant: every handle of one (key, owner)
// points at it.
type hold struct {
	c        *Client
	ops      *driver.GrantOps
	hk       holdKey // registry key: kind, key, owner
	plain    bool    // a Client.Acquire lock (not a pattern grant)
	key      string
	owner    Owner
	token    Token
	sig      string // the service's signature of token (Result.Signature)
	watchdog bool
	explicit bool // owner came from the caller's context: same-owner calls may race
	logger   *slog.Logger
	observer Observer
	driftF   float64       // drift allowance: lease·driftF + driftD
	driftD   time.Duration //

	parent context.Context // the Acquire context, for its values
	gate   func()          // local-first gate, released with the hold

	// guarded by c.mu
	count int
	// releasing is non-nil while the final release runs: releaseRunning
	// until someone waits for its end, then a channel of its own, closed
	// at the end.
	releasing chan struct{}

	mu         sync.Mutex
	lease      time.Duration
	validUntil time.Time // local: grant start + lease − drift
	nextRenew  time.Time
	renewing   bool           // a watchdog renewal of this hold is in flight
	renewFrom  time.Time      // when that renewal was collected: its next renewal is about lease/3 later
	timer      *time.Timer    // the validity timer, or nil in a group
	group      *validityGroup // the shared validity timer of a set granted together
	finished   bool
	lostFlag   atomic.Bool
	// lost is Lost's channel, made on first use (most holders never ask);
	// lostClosed records that markLost closed it, or would have.
	lost       chan struct{}
	lostClosed bool
	// The lock context is made on first use (most holders never ask), and
	// made already cancelled if the hold ended before.
	stopLoss func() // ends a LossNotifier arrangement
	ctx      context.Context
	cancel   context.CancelCauseFunc
	cause    error       // why the hold ended, once it has
	onEnd    []*endWatch // called once with the cause when the hold ends (LockSets' member watches)
	onEndBuf [1]*endWatch
	granted  time.Time   // start of the granted attempt
	ended    atomic.Bool // HoldEnded reported
	// first is the handle Acquire (or AcquireMany, for a member of a set)
	// returns for a new hold, allocated with it; reentrant acquisitions get
	// handles of their own.
	first Lock
}

func newHold(c *Client, ops *driver.GrantOps, hk holdKey, ctx context.Context, req driver.Request, res driver.Result, start time.Time, cfg *config, gate func()) *hold {
	h := new(hold)
	h.init(c, ops, hk, ctx, req, res, start, cfg, gate)
	return h
}

// init sets up a new hold in place (a set's holds share one allocation).
func (h *hold) init(c *Client, ops *driver.GrantOps, hk holdKey, ctx context.Context, req driver.Request, res driver.Result, start time.Time, cfg *config, gate func()) {
	lease := req.Lease
	if res.TTL > 0 && res.TTL < lease {
		lease = res.TTL // a fair handoff may carry less than a full lease
	}
	*h = hold{
		c:        c,
		ops:      ops,
		hk:       hk,
		key:      req.Key,
		owner:    req.Owner,
		token:    res.Token,
		sig:      res.Signature,
		watchdog: cfg.watchdog,
		logger:   cfg.logger,
		observer: cfg.observer,
		driftF:   cfg.driftFrac,
		driftD:   cfg.driftFixed,
		parent:   ctx,
		gate:     gate,
		count:    1,
		lease:    req.Lease,
	}
	h.first.h = h
	h.validUntil = start.Add(lease - h.drift(lease))
	h.nextRenew = start.Add(lease / 3)
	h.granted = start
}

// drift is the clock-drift allowance for lease (see WithDrift).
func (h *hold) drift(lease time.Duration) time.Duration {
	return time.Duration(float64(lease)*h.driftF) + h.driftD
}

// context returns the hold's context, making it on first use.
func (h *hold) context() context.Context {
	h.mu.Lock()
	defer h.mu.Unlock()
	return lazyContext(&h.ctx, &h.cancel, h.parent, h.owner, h.cause)
}

// lazyContext returns *ctx, the context of a hold or a set, making it
// first if need be: it carries owner and parent's values but not parent's
// cancellation, and is made already cancelled if the holder ended before
// (cause). The caller holds the mutex that guards *ctx and *cancel.
func lazyContext(ctx *context.Context, cancel *context.CancelCauseFunc, parent context.Context, owner Owner, cause error) context.Context {
	if *ctx == nil {
		*ctx, *cancel = context.WithCancelCause(ContextWithOwner(context.WithoutCancel(parent), owner))
		if cause != nil {
			(*cancel)(cause)
		}
	}
	return *ctx
}

// end records why the hold ended and cancels its context, if made, with
// that cause. The first cause wins.
func (h *hold) end(cause error) {
	h.mu.Lock()
	first := h.cause == nil
	if first {
		h.cause = cause
	}
	if h.cancel != nil {
		h.cancel(cause)
	}
	onEnd := h.onEnd
	h.onEnd = nil
	h.mu.Unlock()
	if first {
		for _, w := range onEnd {
			w.f(cause)
		}
	}
}

// endWatch is one watchEnd arrangement.
type endWatch struct{ f func(error) }

// watchEnd arranges for w.f to be called once with the cause when the hold
// ends (at once if it already has); unwatch cancels the arrangement. It is
// cheaper than a context.AfterFunc on the lock's context, which would have
// to be made first, and one arrangement may watch many holds (a LockSet's
// members).
func (h *hold) watchEnd(w *endWatch) {
	h.mu.Lock()
	cause := h.cause
	if cause == nil {
		if h.onEnd == nil {
			h.onEnd = h.onEndBuf[:0] // a hold has at most one watcher, its set
		}
		h.onEnd = append(h.onEnd, w)
	}
	h.mu.Unlock()
	if cause != nil {
		w.f(cause)
	}
}

func (h *hold) unwatch(w *endWatch) {
	h.mu.Lock()
	h.onEnd = slices.DeleteFunc(h.onEnd, func(x *endWatch) bool { return x == w })
	h.mu.Unlock()
}

// armValidity starts the timer that declares the lock lost once its local
// validity has passed without a renewal.
func (h *hold) armValidity() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.finished {
		return
	}
	h.timer = time.AfterFunc(time.Until(h.validUntil), h.checkExpired)
}

func (h *hold) checkExpired() {
	h.mu.Lock()
	if h.finished {
		h.mu.Unlock()
		return
	}
	if d := time.Until(h.validUntil); d > 0 { // renewed meanwhile
		h.timer.Reset(d)
		h.mu.Unlock()
		return
	}
	h.mu.Unlock()
	h.markLost("lease expired locally before renewal")
}

// A validityGroup is one validity timer for the holds of a set granted in
// one backend call (Client.AcquireMany through a ManyAcquirer): they start
// with one validUntil, so one timer serves them where one each would cost
// an allocation and a timer-heap insertion per key on the acquire path. It
// fires at the earliest validUntil of its live members, declares lost every
// member whose validity has passed, and re-arms for the rest.
//
// Lock order: g.mu, then a member's h.mu. A member therefore tells the
// group of a changed validity (schedule) and of its end (memberDone) after
// releasing its own mutex.
type validityGroup struct {
	holds []*hold // fixed at creation

	mu    sync.Mutex
	timer *time.Timer
	at    time.Time // when the timer fires
	live  int       // members not finished
}

// armGroup gives holds (fresh, unregistered elsewhere yet) one shared
// validity timer.
func armGroup(holds []*hold) {
	g := &validityGroup{holds: holds, live: len(holds)}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, h := range holds {
		h.mu.Lock()
		h.group = g
		if h.finished {
			g.live--
		} else if g.at.IsZero() || h.validUntil.Before(g.at) {
			g.at = h.validUntil
		}
		h.mu.Unlock()
	}
	if g.live > 0 {
		g.timer = time.AfterFunc(time.Until(g.at), g.check)
	}
}

func (g *validityGroup) check() {
	var expired []*hold
	g.mu.Lock()
	if g.live == 0 {
		g.mu.Unlock()
		return
	}
	var next time.Time
	now := time.Now()
	for _, h := range g.holds {
		h.mu.Lock()
		switch {
		case h.finished:
		case !h.validUntil.After(now):
			expired = append(expired, h)
		case next.IsZero() || h.validUntil.Before(next):
			next = h.validUntil
		}
		h.mu.Unlock()
	}
	if !next.IsZero() {
		g.at = next
		g.timer.Reset(next.Sub(now))
	}
	g.mu.Unlock()
	for _, h := range expired {
		h.markLost("lease expired locally before renewal")
	}
}

// schedule makes the timer fire by t (a member's new validUntil) at the
// latest. A later t needs nothing: the timer fires early and re-arms.
func (g *validityGroup) schedule(t time.Time) {
	g.mu.Lock()
	if g.live > 0 && t.Before(g.at) {
		g.at = t
		g.timer.Reset(time.Until(t))
	}
	g.mu.Unlock()
}

// memberDone counts a member's end; the timer stops with the last one.
func (g *validityGroup) memberDone() {
	g.mu.Lock()
	if g.live--; g.live == 0 && g.timer != nil {
		g.timer.Stop()
	}
	g.mu.Unlock()
}

// renewed records a successful extension sent at start for lease.
func (h *hold) renewed(start time.Time, lease time.Duration) {
	h.mu.Lock()
	if h.finished {
		h.mu.Unlock()
		return
	}
	h.lease = lease
	h.validUntil = start.Add(lease - h.drift(lease))
	h.nextRenew = start.Add(lease / 3)
	if h.timer != nil {
		h.timer.Reset(time.Until(h.validUntil))
	}
	g, until := h.group, h.validUntil
	h.mu.Unlock()
	if g != nil { // after h.mu: the group's mutex comes first
		g.schedule(until)
	}
}

func (h *hold) isLost() bool { return h.lostFlag.Load() }

// markLost signals loss: Lost closes and the context is cancelled with
// ErrLost. The hold leaves the registry so the owner can acquire afresh.
func (h *hold) markLost(why string) {
	if !h.lostFlag.CompareAndSwap(false, true) {
		return
	}
	h.observeEnd(StatusLost, why) // before Lost closes, so observers agree with what a reader of Lost sees
	h.end(ErrLost)                // before Lost closes, so a reader woken by Lost sees the cause
	h.mu.Lock()
	h.lostClosed = true
	if h.lost != nil {
		close(h.lost)
	}
	h.mu.Unlock()
	h.c.wd.remove(h)
	h.c.mu.Lock()
	if h.c.holds[h.hk] == h {
		delete(h.c.holds, h.hk)
	}
	h.c.mu.Unlock()
	if l := h.logger; l != nil {
		l.Warn("lockx: lock lost", "kind", h.hk.kind, "key", h.key, "token", uint64(h.token), "reason", why)
	}
}

// finish stops the hold's timers and cancels its context with cause.
func (h *hold) finish(cause error) {
	h.mu.Lock()
	if h.finished {
		h.mu.Unlock()
		return
	}
	h.finished = true
	if h.timer != nil {
		h.timer.Stop()
	}
	stopLoss, g := h.stopLoss, h.group
	h.mu.Unlock()
	if g != nil {
		g.memberDone()
	}
	if stopLoss != nil {
		stopLoss()
	}
	h.c.wd.remove(h)
	h.end(cause)
}

func (h *hold) releaseGate() {
	if h.gate != nil {
		h.gate()
		h.gate = nil
	}
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
		err = releaseWithRetry(ctx, r.h.ops.Release, r.h.key, r.h.owner)
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
	h.releaseGate()
	c.mu.Lock()
	if c.holds[h.hk] == h {
		delete(c.holds, h.hk)
	}
	if h.releasing != nil && h.releasing != releaseRunning {
		close(h.releasing)
	}
	c.mu.Unlock()
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
