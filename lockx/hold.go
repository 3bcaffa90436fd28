package lockx

import (
	"context"
	"github.com/lockx-go/lockx/lockx/driver"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// hold is the shared state of one grant: every handle of one (key, owner)
// points at it.
//
// Its fields come in five groups, by what guards them, and each is read and
// written only as its group says:
//
//   - fixed: set by init before the hold is published (put in the Client's
//     registry or handed out), never written after; read without a lock;
//   - c.mu, the Client's mutex, which guards its registry of holds: the
//     handle count and the final release's state, which re-entry and
//     release decide on together with the registry;
//   - h.mu: what changes while the lock is held — the lease and its local
//     validity, the renewal schedule, the lock's context and how the
//     hold ended. renewing and renewFrom are the watchdog's
//     besides: it writes them holding its own w.mu as well, so that a
//     collect, which holds w.mu, sees a renewal group's holds change
//     together;
//   - c.exp.mu, the Client's validity heap's mutex: the hold's place in it;
//   - atomics, read without a lock on every re-entry and release.
//
// Lock order: the watchdog's w.mu comes before h.mu, and h.mu before the
// validity heap's c.exp.mu; c.mu is never held together with h.mu.
type hold struct {
	// fixed
	c        *Client
	ops      *driver.GrantOps
	hk       holdKey // registry key: kind, key, owner
	plain    bool    // a Client.Acquire lock (not a pattern grant)
	key      string
	owner    Owner
	token    Token
	sig      string // the service's signature of token (driver.Result.Signature)
	watchdog bool
	explicit bool // owner came from the caller's context: same-owner calls may race
	logger   *slog.Logger
	observer Observer
	driftF   float64         // drift allowance: lease·driftF + driftD
	driftD   time.Duration   //
	parent   context.Context // the Acquire context, for its values
	granted  time.Time       // start of the granted attempt
	// first is the handle Acquire (or AcquireMany, for a member of a set)
	// returns for a new hold, allocated with it; reentrant acquisitions get
	// handles of their own.
	first Lock

	// guarded by c.mu
	count int // live handles
	// releasing is non-nil while the final release runs: releaseRunning
	// until someone waits for its end, then a channel of its own, closed
	// at the end.
	releasing chan struct{}
	gate      *gate // the LocalFirst gate; nil once left (releaseGate) or passed on

	// guarded by h.mu
	mu         sync.Mutex
	lease      time.Duration
	validUntil time.Time // local: grant start + lease − drift
	nextRenew  time.Time
	// period is the validity nextRenew counts a third of: the grant's TTL
	// (a fair handoff may carry less than lease), then lease once renewed.
	// The watchdog's window is a fraction of it, not of lease: a 5 s
	// handoff of a 30 s lease is renewed after about 1.7 s, not at once.
	period    time.Duration
	renewing  bool      // a watchdog renewal of this hold is in flight (and w.mu)
	renewFrom time.Time // when that renewal was collected: its next renewal is about lease/3 later (and w.mu)
	finished  bool
	stopLoss  func() // ends a LossNotifier arrangement
	// lost is Lost's channel, made on first use (most holders never ask);
	// lostClosed records that markLost closed it, or would have.
	lost       chan struct{}
	lostClosed bool
	// The lock context is made on first use (most holders never ask), and
	// made already cancelled if the hold ended before.
	ctx      context.Context
	cancel   context.CancelCauseFunc
	cause    error       // why the hold ended, once it has
	onEnd    []*endWatch // called once with the cause when the hold ends (LockSets' member watches)
	onEndBuf [1]*endWatch

	// guarded by c.exp.mu
	expIdx int // index in the Client's validity heap (expiries), -1 when out

	// atomics
	lostFlag atomic.Bool // markLost ran
	ended    atomic.Bool // HoldEnded reported
}

// newHold returns the hold of a's grant.
func newHold(ctx context.Context, a *acquisition) *hold {
	h := new(hold)
	h.init(ctx, a)
	return h
}

// init sets up the hold of a's grant in place (a set's holds share one
// allocation). ctx is the acquiring call's, for its values; the hold takes
// over a's LocalFirst gate.
func (h *hold) init(ctx context.Context, a *acquisition) {
	lease := a.req.Lease
	if a.res.TTL > 0 && a.res.TTL < lease {
		lease = a.res.TTL // a fair handoff may carry less than a full lease
	}
	*h = hold{
		c:        a.c,
		ops:      a.ops,
		hk:       a.hk,
		plain:    a.plain(),
		key:      a.req.Key,
		owner:    a.req.Owner,
		token:    a.res.Token,
		sig:      a.res.Signature,
		watchdog: a.cfg.watchdog,
		explicit: a.explicit,
		logger:   a.cfg.logger,
		observer: a.cfg.observer,
		driftF:   a.cfg.driftFrac,
		driftD:   a.cfg.driftFixed,
		parent:   ctx,
		granted:  a.start,
		gate:     a.gate,
		count:    1,
		lease:    a.req.Lease,
		expIdx:   -1,
	}
	a.gate = nil
	h.first.h = h
	h.validUntil = a.start.Add(lease - h.drift(lease))
	h.nextRenew = a.start.Add(lease / 3)
	h.period = lease
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

// armValidity has the Client's validity timer declare the lock lost once
// its local validity has passed without a renewal (expiries).
func (h *hold) armValidity() {
	h.mu.Lock()
	if !h.finished {
		h.c.exp.add(h, h.validUntil)
	}
	h.mu.Unlock()
}

// renewed records a successful extension sent at start for lease.
func (h *hold) renewed(start time.Time, lease time.Duration) {
	h.mu.Lock()
	if h.finished {
		h.mu.Unlock()
		return
	}
	h.lease, h.period = lease, lease
	h.validUntil = start.Add(lease - h.drift(lease))
	h.nextRenew = start.Add(lease / 3)
	h.c.exp.update(h, h.validUntil)
	h.mu.Unlock()
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
	h.c.exp.remove(h)
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
	h.c.exp.remove(h)
	stopLoss := h.stopLoss
	h.mu.Unlock()
	if stopLoss != nil {
		stopLoss()
	}
	h.c.wd.remove(h)
	h.end(cause)
}

// releaseGate leaves the hold's LocalFirst gate if nobody has: Close and
// the final release may both end a hold, and a gate left twice would take
// another caller's place.
func (h *hold) releaseGate() {
	h.c.mu.Lock()
	gate := h.takeGate()
	h.c.mu.Unlock()
	if gate != nil {
		h.c.gates.leave(gate)
	}
}

// takeGate returns the hold's LocalFirst gate to leave or pass on, to one
// caller only. Callers hold c.mu.
func (h *hold) takeGate() *gate {
	gate := h.gate
	h.gate = nil
	return gate
}
