package cronguard

import (
	"context"
	"errors"
	"time"

	"github.com/lockx-go/lockx/lockx"
)

// Job is a job guarded to run once per trigger across every instance that
// schedules it. Hand Run to any scheduler that calls a func() (time.Ticker
// loops, robfig/cron — *Job is a cron.Job —, Kubernetes-style sidecars), or
// RunAt to one that knows the time it meant.
type Job struct {
	c  *Claimer
	fn func(context.Context) error
}

// Guard wraps fn so that, whichever instances fire for a trigger, exactly one
// runs it: the one that first claims the lock "cron:<job>:<trigger time>".
// The others skip, and each skip is reported (OnSkip, RunAt's error). The
// trigger is the schedule's instant nearest to the firing time: an instance
// that fires less than half a period late by its own clock names the
// trigger it meant, whatever its clock's offset, and offsets between
// instances only have to stay within AtLeastFor; with UsingBackendTime the
// store's clock names it and any offset is harmless (the exact bounds are
// in docs/patterns/cronguard.md, "Clock skew: the exact bound").
//
// Bad input — an empty job, a nil fn, no schedule, a schedule that fires at
// most once, a schedule finer than the backend's clock resolution,
// AtLeastFor > AtMostFor — is an *lockx.ArgError. The schedule is judged by
// its own triggers, never by the clock: one about to end is accepted.
func Guard(locks *lockx.Client, job string, fn func(context.Context) error, opts ...Option) (*Job, error) {
	if fn == nil {
		return nil, &lockx.ArgError{Arg: "fn", Reason: "nil"}
	}
	c, err := NewClaimer(locks, job, opts...)
	if err != nil {
		return nil, err
	}
	return &Job{c: c, fn: fn}, nil
}

// Name returns the job's name.
func (j *Job) Name() string { return j.c.job }

// LastRuns returns up to n of the job's most recent outcome records, newest
// first (all that the store keeps if n <= 0).
func (j *Job) LastRuns(ctx context.Context, n int) ([]Run, error) { return j.c.LastRuns(ctx, n) }

// Run runs the trigger nearest to now if this instance wins it. Its
// signature fits any scheduler; outcomes go to the store and skips to the
// OnSkip hook.
func (j *Job) Run() { _ = j.RunNow(context.Background()) }

// RunNow is Run with a context and a result: nil or the job's error if this
// instance ran the trigger, a *SkipError (ErrSkipped) if it did not.
func (j *Job) RunNow(ctx context.Context) error {
	cl, err := j.c.ClaimNow(ctx)
	if err != nil {
		return err
	}
	return j.run(cl)
}

// RunAt runs the trigger nearest to scheduled, the instant the scheduler
// meant, if this instance wins it. It returns nil or the job's error if this
// instance ran it, and a *SkipError (ErrSkipped) if it did not.
func (j *Job) RunAt(ctx context.Context, scheduled time.Time) error {
	cl, err := j.c.Claim(ctx, scheduled)
	if err != nil {
		return err
	}
	return j.run(cl)
}

func (j *Job) run(cl *Claim) error {
	ferr := j.fn(cl.Context())
	if ferr == nil && cl.ceilingHit.Load() {
		ferr = ErrAtMostFor
	}
	return errors.Join(ferr, cl.Finish(ferr))
}
