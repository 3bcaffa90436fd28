package cronguard

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
)

// finishTimeout bounds the bookkeeping after a run: recording the outcome
// and keeping or freeing the claim.
const finishTimeout = 5 * time.Second

// Claim is one instance's permission to run one trigger. Run the job under
// Context, then call Finish exactly once.
type Claim struct {
	c       *Claimer
	trigger time.Time
	key     string
	owner   lockx.Owner
	token   lockx.Token
	started time.Time // instance clock, for the record
	mono    time.Time // time.Now at the claim: durations use its monotonic reading

	running bool        // AtMostOnce: the running key is held by owner
	lock    *lockx.Lock // AtLeastOnce: the trigger's renewed lock
	run     *lockx.Lock // AtLeastOnce: the running key's renewed lock

	watchStop  chan struct{} // ends watchLoss's goroutine
	watchDone  chan struct{}
	ctx        context.Context
	cancel     context.CancelCauseFunc
	ceiling    *time.Timer
	stops      []func() bool
	ceilingHit atomic.Bool
	lost       atomic.Bool
	finished   atomic.Bool
}

// Trigger returns the scheduled instant the claim is for.
func (cl *Claim) Trigger() time.Time { return cl.trigger }

// Token returns the fencing token of the trigger's claim.
func (cl *Claim) Token() lockx.Token { return cl.token }

// Context returns the run's context: it carries the trigger
// (TriggerFromContext) and is cancelled with cause ErrAtMostFor at the
// ceiling, with lockx.ErrLost if a renewed claim is lost, and when the
// context given to Claim ends.
func (cl *Claim) Context() context.Context { return cl.ctx }

// Finish ends the run with the job's result: it records the outcome, frees
// the running key, and keeps the trigger's claim until AtLeastFor after it
// was taken (AtMostOnce) or frees it once the record is written
// (AtLeastOnce: the record is then what marks the trigger done). It returns
// an error if the outcome could not be recorded or the claim not kept; a
// second call returns an error and does nothing.
func (cl *Claim) Finish(runErr error) error {
	if !cl.finished.CompareAndSwap(false, true) {
		return errors.New("cronguard: claim finished twice")
	}
	d := time.Since(cl.mono)
	cl.ceiling.Stop()
	for _, stop := range cl.stops {
		stop()
	}
	if cl.watchStop != nil {
		close(cl.watchStop)
		<-cl.watchDone
	}
	cl.cancel(nil)
	c := cl.c
	r := Run{Job: c.job, Trigger: cl.trigger, Instance: c.cfg.instance, Token: cl.token,
		Started: cl.started, Duration: d, Lost: cl.lost.Load() || (cl.lock == nil && d >= c.cfg.atMost)}
	if runErr != nil {
		r.Error = runErr.Error()
	} else if cl.ceilingHit.Load() {
		r.Error = ErrAtMostFor.Error()
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(cl.ctx), finishTimeout)
	defer cancel()
	err := c.cfg.store.Record(ctx, r)
	if err != nil && c.cfg.logger != nil {
		c.cfg.logger.Warn("cronguard: outcome not recorded", "job", c.job, "trigger", cl.trigger, "err", err)
	}
	if cl.lock != nil { // AtLeastOnce
		if cl.run != nil {
			_ = cl.run.Release(ctx)
		}
		if rerr := cl.lock.Release(ctx); errors.Is(rerr, lockx.ErrLost) {
			err = errors.Join(err, rerr)
		}
		return err
	}
	if cl.running {
		_ = c.b.Release(ctx, runningKey(c.job), cl.owner)
	}
	return errors.Join(err, cl.retainCtx(ctx))
}

// retain keeps the trigger's claim until AtLeastFor after it was taken,
// or frees it if that moment has passed (every instance has asked by then),
// the way ShedLock's unlock sets lock_until to lockedAt + lockAtLeastFor.
func (cl *Claim) retain() {
	ctx, cancel := context.WithTimeout(context.Background(), finishTimeout)
	defer cancel()
	_ = cl.retainCtx(ctx)
}

func (cl *Claim) retainCtx(ctx context.Context) error {
	c := cl.c
	left := c.cfg.atLeast - time.Since(cl.mono)
	var err error
	if left >= c.cfg.resolution && left >= time.Millisecond {
		err = c.b.Extend(ctx, cl.key, cl.owner, left)
	} else {
		err = c.b.Release(ctx, cl.key, cl.owner)
	}
	if errors.Is(err, lockx.ErrNotHeld) {
		// The lease of AtMostFor ran out during the run: the run overran its
		// ceiling and the trigger was unprotected for a while.
		return lockx.ErrLost
	}
	return err
}

// watchLoss cancels an AtMostOnce run whose claim is lost before its lease
// ends (a Redis failover, a PostgreSQL session that died): by the backend's
// notification if it has one, else by asking for the claim's TTL every
// quarter of AtMostFor (at most every 30 s). An unanswered question proves
// nothing and is ignored; the ceiling still ends the run.
func (cl *Claim) watchLoss(cancel context.CancelCauseFunc) {
	c := cl.c
	lost := func() {
		if time.Since(cl.mono) >= c.cfg.atMost {
			return // the lease ran out at the ceiling, as it should: not a loss
		}
		cl.lost.Store(true)
		cancel(lockx.ErrLost)
	}
	var ln driver.LossNotifier
	if driver.As(c.b, &ln) {
		stop := ln.NotifyLoss(cl.key, cl.owner, lost)
		cl.stops = append(cl.stops, func() bool { stop(); return true })
		return
	}
	every := min(max(c.cfg.atMost/4, 10*time.Millisecond), 30*time.Second)
	cl.watchStop, cl.watchDone = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(cl.watchDone)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-cl.watchStop:
				return
			case <-t.C:
			}
			ctx, cancelTTL := context.WithTimeout(context.Background(), every)
			_, err := c.b.TTL(ctx, cl.key, cl.owner)
			cancelTTL()
			if errors.Is(err, lockx.ErrNotHeld) && time.Since(cl.mono) < c.cfg.atMost {
				lost()
				return
			}
		}
	}()
}
