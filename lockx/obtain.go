package lockx

import (
	"context"
	"errors"
	"fmt"
	"github.com/lockx-go/lockx/lockx/driver"
	"time"
)

// obtain asks the backend until it grants a.req, and records the grant in
// a.res and a.start; or it gives up, withdrawing what the backend may hold
// for the request, and returns why.
//
// The first attempt goes out unwatched, so an uncontended acquisition pays
// nothing for wake-ups. Once refused, the waiter registers for its wake-up
// (a Notifier backend) and tries again at once: a release between the two
// attempts finds the second one, a release after it finds the
// registration. A refusal that says the backend queued the request and
// owes its wake-ups to a later watch (driver.Result.Queued) skips that
// second attempt: the waiter registers and waits. From then on each
// attempt is watched, and a refused one is followed by a pause until a
// wake-up, the backoff timer, ctx's end, the wait budget or the Client's
// Close.
func (a *acquisition) obtain(ctx context.Context) error {
	a.bo = newBackoff(a.cfg.minBackoff, a.cfg.maxBackoff)
	// Pattern holds may queue whatever driver.Request.Fair says, and a
	// backend may queue any waiting request (redislock hands a hot key to
	// the next in line by default): a waiter that gives up withdraws.
	a.queued = a.req.Fair || a.req.Wait || !a.plain()
	defer a.endWait()
	for {
		a.watch(ctx)
		res, start, err := a.try(ctx)
		if err == nil && res.Acquired {
			return a.granted(res, start)
		}
		if err := a.judge(ctx, err); err != nil {
			return err
		}
		if !a.watching && a.c.notifier != nil {
			a.watching = true
			if err == nil && !res.Queued {
				continue // the second attempt, at once
			}
			if err == nil {
				// The backend queued the request and owes its wake-ups to a
				// watch registered now (driver.Result.Queued): no second
				// attempt, which on a hot key is a round trip per handoff.
				a.watch(ctx)
			}
		}
		if err := a.pause(ctx, res, err); err != nil {
			return err
		}
	}
}

// attempts is the state of obtain's loop, part of an acquisition.
type attempts struct {
	bo     backoff
	queued bool // the backend may hold a queue entry for the request: withdraw it on giving up

	watching  bool  // past the first refusal: each attempt is watched
	ambiguous bool  // an attempt's outcome was unknown: a grant may stand behind it
	lastErr   error // the last attempt's error, reported with a refusal
	waiting   bool  // reported to the Observer as waiting

	wake    <-chan struct{} // this attempt's wake-up, if watched
	unwatch func()          // ends this attempt's watch, if watched
}

// watch registers for the wake-up of the attempt about to be sent, once the
// loop is watching. A registration that fails leaves the backoff timer to
// stand in for it.
func (a *acquisition) watch(ctx context.Context) {
	a.wake, a.unwatch = nil, nil
	c := a.c
	if !a.watching || !a.req.Wait || c.notifier == nil {
		return
	}
	if wake, cancel, err := c.watch(ctx, a.req, a.budgetAt); err == nil {
		a.wake, a.unwatch = wake, cancel
	}
}

// endWatch ends this attempt's watch, if it has one.
func (a *acquisition) endWatch() {
	if a.unwatch != nil {
		a.unwatch()
		a.unwatch = nil
	}
}

// try makes one attempt: driver.GrantOps.Acquire, which for a plain lock is
// driver.Backend.Acquire, bounded by the wait budget. start is when it was
// sent, where a granted lease begins.
func (a *acquisition) try(ctx context.Context) (res driver.Result, start time.Time, err error) {
	start = time.Now()
	a.st.attempts++
	a.st.lastStart = start
	res, err = a.c.attempt(ctx, a.ops, a.req, a.budgetAt)
	return res, start, err
}

// granted ends the loop with a grant, unless its token is not one a
// backend may issue.
func (a *acquisition) granted(res driver.Result, start time.Time) error {
	a.endWatch()
	if !res.Token.Valid() {
		a.c.abandon(a.ops, a.req)
		return driver.Unavailable("acquire", fmt.Errorf("backend issued invalid token %d", res.Token))
	}
	a.res, a.start = res, start
	return nil
}

// judge looks at a refused attempt (err nil: the key is held by someone
// else; otherwise the backend's error) and returns the call's final error,
// or nil to go on.
func (a *acquisition) judge(ctx context.Context, err error) error {
	req := &a.req
	if isVerdict(err) {
		return a.giveUp(req.Wait, err)
	}
	if err != nil { // an unknown outcome: retried
		a.ambiguous = true
		if !errors.Is(err, errBudget) {
			// An attempt the wait budget cut off is no failure of the
			// backend: the verdict stays "busy for the whole budget".
			a.lastErr = err
		}
	}
	switch {
	case ctx.Err() != nil:
		return a.giveUp(a.ambiguous, joinErr(ErrNotAcquired, context.Cause(ctx), a.lastErr))
	case !req.Wait && err != nil:
		return a.giveUp(a.ambiguous, err)
	case !req.Wait:
		a.endWatch()
		return ErrNotAcquired
	}
	return nil
}

// isVerdict reports whether an attempt's error is a verdict rather than an
// unknown outcome: no retry can change it. ErrNoRetry is a wrapper's word
// that asking again now is pointless (an open circuit breaker: the attempt
// never reached the backend, and waiting would only pile callers up behind
// it). A closed backend never grants again.
func isVerdict(err error) bool {
	return err != nil && (errors.Is(err, driver.ErrUpgrade) || errors.Is(err, ErrInvalidArgument) ||
		errors.Is(err, driver.ErrNoRetry) || errors.Is(err, ErrClosed))
}

// pause waits before the next attempt: for the wake-up, the backoff timer
// or ctx's end (the next attempt then reports it). The backoff is cut to
// the holder's remaining lease, and while queued to a third of the queue
// TTL, so that the queue entry is refreshed before it lapses. When the wait
// budget is spent or the Client closes, pause gives up and returns why.
func (a *acquisition) pause(ctx context.Context, res driver.Result, err error) error {
	a.startWait()
	delay := a.bo.next()
	if err == nil && res.TTL > 0 && res.TTL+time.Millisecond < delay {
		delay = res.TTL + time.Millisecond
	}
	if q := a.req.QueueTTL / 3; a.queued && q > 0 && delay > q {
		delay = q
	}
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-a.wake:
	case <-t.C:
	case <-ctx.Done():
	case <-a.budget:
		return a.giveUp(true, joinErr(ErrNotAcquired, nil, a.lastErr))
	case <-a.c.done:
		return a.giveUp(a.ambiguous, joinErr(ErrNotAcquired, ErrClosed, nil))
	}
	a.endWatch()
	return nil
}

// giveUp ends the loop with err. It ends the watch and, if withdraw or the
// request may have queued, withdraws the request from the backend: Release
// is owner-checked, so it frees a grant that may stand behind an unanswered
// attempt and never another owner's lock.
func (a *acquisition) giveUp(withdraw bool, err error) error {
	a.endWatch()
	if withdraw || a.queued {
		a.c.abandon(a.ops, a.req)
	}
	return err
}

// startWait reports the start of a wait to the Observer, once per call.
func (a *acquisition) startWait() {
	if !a.waiting && a.cfg.observer != nil {
		a.waiting = true
		observeWait(a.cfg, a.ops.Kind, a.req.Key, +1)
	}
}

// endWait reports the end of the wait that startWait reported, if any.
func (a *acquisition) endWait() {
	if a.waiting {
		observeWait(a.cfg, a.ops.Kind, a.req.Key, -1)
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
	w, gaveUp := bounded(ctx, c, budgetAt, func(ctx context.Context) watched {
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
