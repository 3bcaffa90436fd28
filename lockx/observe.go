package lockx

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockx-go/lockx/lockx/driver"
)

// Observer receives the events of a Client's locks, for metrics and traces.
// Package lockx/lockxotel implements it on OpenTelemetry; lockx itself
// imports no telemetry library, and a Client without an Observer does no
// observation work at all (no clock reads, no allocations).
//
// Events are reported after the fact, with their start time and duration,
// so an implementation can record a span with explicit timestamps. Methods
// are called synchronously on the lock's hot path and from the watchdog:
// they must be fast, safe for concurrent use, and must not call back into
// the Client. Embed NopObserver to stay compatible with events added later.
type Observer interface {
	// Acquired reports the end of an Acquire, TryAcquire or AcquireGrant
	// call, whatever its outcome. ctx is the caller's.
	Acquired(ctx context.Context, e AcquireEvent)
	// Extended reports a lease renewal, by the watchdog or by Lock.Extend.
	Extended(ctx context.Context, e ExtendEvent)
	// Released reports a Lock.Release call.
	Released(ctx context.Context, e ReleaseEvent)
	// HoldEnded reports the end of a hold that Acquired reported with
	// NewHold: its final release, its loss, or its client's Close. Every
	// such hold ends exactly once, so NewHold − HoldEnded is the number of
	// locks held.
	HoldEnded(e HoldEvent)
	// Waiting reports a caller starting (+1) or ending (−1) a wait for a
	// key held by someone else.
	Waiting(kind, key string, delta int)
}

// NopObserver is an Observer that ignores every event. Embed it in an
// Observer that handles only some events.
type NopObserver struct{}

// Acquired implements Observer.
func (NopObserver) Acquired(context.Context, AcquireEvent) {}

// Extended implements Observer.
func (NopObserver) Extended(context.Context, ExtendEvent) {}

// Released implements Observer.
func (NopObserver) Released(context.Context, ReleaseEvent) {}

// HoldEnded implements Observer.
func (NopObserver) HoldEnded(HoldEvent) {}

// Waiting implements Observer.
func (NopObserver) Waiting(string, string, int) {}

// WithObserver sets the Observer that receives the events of the client's
// locks (given to New) or of one call. nil, the default, observes nothing.
func WithObserver(o Observer) Option { return func(c *config) { c.observer = o } }

// Status classifies the outcome of an operation for metrics and traces.
type Status string

// Statuses reported in events. StatusOf maps an error to one of them.
const (
	StatusOK          Status = "ok"
	StatusNotAcquired Status = "not_acquired" // refused, or the wait budget ran out
	StatusTimeout     Status = "timeout"      // the caller's context deadline passed
	StatusCanceled    Status = "canceled"     // the caller's context was cancelled
	StatusUnavailable Status = "unavailable"  // the backend failed or the breaker is open
	StatusNotHeld     Status = "not_held"
	StatusLost        Status = "lost"
	StatusClosed      Status = "closed"
	StatusInvalid     Status = "invalid" // an *ArgError or another final verdict
)

// StatusOf classifies err. A wait that ended on the caller's deadline is a
// timeout even if the backend failed meanwhile; a refusal after a backend
// failure is unavailable.
func StatusOf(err error) Status {
	switch {
	case err == nil:
		return StatusOK
	case errors.Is(err, ErrInvalidArgument), errors.Is(err, driver.ErrUpgrade):
		return StatusInvalid
	case errors.Is(err, ErrClosed):
		return StatusClosed
	case errors.Is(err, context.DeadlineExceeded):
		return StatusTimeout
	case errors.Is(err, context.Canceled):
		return StatusCanceled
	case errors.Is(err, ErrLost):
		return StatusLost
	case errors.Is(err, ErrUnavailable):
		return StatusUnavailable
	case errors.Is(err, ErrNotHeld):
		return StatusNotHeld
	case errors.Is(err, ErrNotAcquired):
		return StatusNotAcquired
	}
	return StatusUnavailable
}

// AcquireEvent describes one acquisition call.
type AcquireEvent struct {
	Kind     string // "lock", or a pattern's GrantOps.Kind ("rlock", "permit", …)
	Key      string
	Backend  string // the backend's Go type, e.g. "*redislock.Backend"
	Fair     bool
	Wait     bool // Acquire (true) or TryAcquire (false)
	Status   Status
	Err      error
	Token    Token // the grant's token (Status ok)
	NewHold  bool  // a new hold began (false for re-entry and for failures)
	Reentry  bool  // the caller's owner already held the key
	Attempts int   // backend attempts made
	Start    time.Time
	Duration time.Duration // the whole call
	// WaitTime is the part of Duration spent before the attempt that
	// succeeded (or the last attempt): time waiting for the holder.
	WaitTime time.Duration
}

// ExtendEvent describes one lease renewal.
type ExtendEvent struct {
	Kind     string
	Key      string
	Backend  string
	Token    Token
	Watchdog bool // renewed by the watchdog rather than Lock.Extend
	Status   Status
	Err      error
	Start    time.Time
	Duration time.Duration
}

// ReleaseEvent describes one Lock.Release call.
type ReleaseEvent struct {
	Kind     string
	Key      string
	Backend  string
	Token    Token
	Final    bool // the last handle: the lock was freed on the backend
	Status   Status
	Err      error
	Start    time.Time
	Duration time.Duration
}

// HoldEvent describes the end of a hold.
type HoldEvent struct {
	Kind    string
	Key     string
	Backend string
	Token   Token
	Status  Status        // ok (released), lost or closed
	Held    time.Duration // since the grant
	Reason  string        // for lost: why
}

// acquireStats collects what an AcquireEvent needs from inside acquire.
type acquireStats struct {
	attempts  int
	lastStart time.Time
	reentry   bool
	newHold   bool
}

// backendName is the backend's type name for events, computed once.
func backendName(b driver.Backend) string {
	if n, ok := b.(interface{ BackendName() string }); ok {
		return n.BackendName()
	}
	if b == nil {
		return ""
	}
	return fmt.Sprintf("%T", b)
}

// observe reports a's call, which started at start and returned l or err,
// to o.
func (a *acquisition) observe(ctx context.Context, o Observer, start time.Time, l *Lock, err error) {
	end := time.Now()
	if ctx == nil {
		ctx = context.Background()
	}
	st := &a.st
	e := AcquireEvent{
		Kind:     a.ops.Kind,
		Key:      a.req.Key,
		Backend:  a.c.name,
		Fair:     a.cfg.fair,
		Wait:     a.req.Wait,
		Status:   StatusOf(err),
		Err:      err,
		NewHold:  st.newHold,
		Reentry:  st.reentry,
		Attempts: st.attempts,
		Start:    start,
		Duration: end.Sub(start),
	}
	if l != nil {
		e.Token = l.h.token
	}
	if !st.lastStart.IsZero() {
		e.WaitTime = st.lastStart.Sub(start)
	}
	o.Acquired(ctx, e)
}

// observeWait reports the start (+1) or end (−1) of a wait, if observed.
func observeWait(cfg *config, kind, key string, delta int) {
	if o := cfg.observer; o != nil {
		o.Waiting(kind, key, delta)
	}
}

// observeEnd reports the end of h exactly once, if h is observed.
func (h *hold) observeEnd(status Status, reason string) {
	o := h.observer
	if o == nil || !h.ended.CompareAndSwap(false, true) {
		return
	}
	o.HoldEnded(HoldEvent{
		Kind: h.hk.kind, Key: h.key, Backend: h.c.name, Token: h.token,
		Status: status, Held: time.Since(h.granted), Reason: reason,
	})
}

func (h *hold) observeExtend(ctx context.Context, watchdog bool, start time.Time, err error) {
	o := h.observer
	if o == nil {
		return
	}
	o.Extended(ctx, ExtendEvent{
		Kind: h.hk.kind, Key: h.key, Backend: h.c.name, Token: h.token,
		Watchdog: watchdog, Status: StatusOf(err), Err: err,
		Start: start, Duration: time.Since(start),
	})
}
