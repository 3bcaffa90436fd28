package cronguard

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
)

// Claimer claims triggers of one job for the instance that runs them. It is
// the building block of Guard for schedulers that run the job themselves
// and only ask for permission (gocron's Locker); most users want Guard.
// A Claimer is safe for concurrent use.
type Claimer struct {
	locks *lockx.Client
	b     driver.Backend
	job   string
	cfg   config
}

// NewClaimer returns a Claimer for job over locks. Bad input (an empty job,
// no schedule, a schedule that fires at most once, a schedule finer than
// the backend's clock resolution, AtLeastFor > AtMostFor, UsingBackendTime
// on a backend without a Clock, AtLeastOnce without a Store) is an
// *lockx.ArgError. NewClaimer does not read any clock: the schedule's period
// is measured from its own triggers, so the verdict and the defaults are the
// same on every day, and a schedule about to end (or ended) is accepted —
// its last trigger is claimed like the others, and a claim past its end is
// skipped as Unavailable.
func NewClaimer(locks *lockx.Client, job string, opts ...Option) (*Claimer, error) {
	cfg, err := build(locks, job, opts)
	if err != nil {
		return nil, err
	}
	if bs, ok := cfg.store.(*BackendStore); ok {
		bs.register(job, cfg.schedule)
	}
	return &Claimer{locks: locks, b: locks.Backend(), job: job, cfg: cfg}, nil
}

// Job returns the job's name.
func (c *Claimer) Job() string { return c.job }

// Store returns the outcome store.
func (c *Claimer) Store() Store { return c.cfg.store }

// LastRuns returns up to n of the job's most recent outcome records, newest
// first, from the outcome store.
func (c *Claimer) LastRuns(ctx context.Context, n int) ([]Run, error) {
	return c.cfg.store.LastRuns(ctx, c.job, n)
}

// Trigger returns the trigger of the schedule nearest to at.
func (c *Claimer) Trigger(at time.Time) (time.Time, error) {
	return nearest(c.cfg.schedule, at, c.cfg.period)
}

// ClaimNow claims the trigger nearest to now, read from the instance's clock
// or, with UsingBackendTime, from the backend's.
func (c *Claimer) ClaimNow(ctx context.Context) (*Claim, error) {
	at := c.cfg.now()
	if c.cfg.backendTime {
		t, err := c.cfg.clock.Now(ctx)
		if err != nil {
			trig, _ := c.Trigger(at)
			return nil, c.skip(trig, Unavailable, err)
		}
		at = t
	}
	return c.Claim(ctx, at)
}

// Claim claims the trigger nearest to at for this instance: one attempt,
// no waiting (under AtLeastOnce: waiting while another instance runs it).
// A trigger this instance must not run is reported to the OnSkip hook and
// returned as a *SkipError matching ErrSkipped. The caller runs the job
// under the claim's Context and then calls Finish.
func (c *Claimer) Claim(ctx context.Context, at time.Time) (*Claim, error) {
	trig, err := c.Trigger(at)
	if err != nil {
		return nil, c.skip(at, Unavailable, err)
	}
	cl := &Claim{c: c, trigger: trig, key: triggerKey(c.job, trig), owner: lockx.NewOwner(),
		started: c.cfg.now(), mono: time.Now()}
	if c.cfg.delivery == AtLeastOnce {
		err = cl.claimRenewed(ctx)
	} else {
		err = cl.claimLeased(ctx)
	}
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancelCause(context.WithValue(ctx, triggerCtxKey{}, trig))
	cl.ctx, cl.cancel = rctx, cancel
	cl.ceiling = time.AfterFunc(c.cfg.atMost-time.Since(cl.mono), func() {
		cl.ceilingHit.Store(true)
		cancel(ErrAtMostFor)
	})
	if cl.lock == nil { // AtMostOnce: the claim is not the Client's to watch
		cl.watchLoss(cancel)
	}
	for _, l := range []*lockx.Lock{cl.lock, cl.run} {
		if l != nil {
			lctx := l.Context()
			cl.stops = append(cl.stops, context.AfterFunc(lctx, func() {
				if cause := context.Cause(lctx); errors.Is(cause, lockx.ErrLost) || errors.Is(cause, lockx.ErrClosed) {
					cl.lost.Store(true)
					cancel(cause)
				}
			}))
		}
	}
	return cl, nil
}

// claimLeased takes the trigger (and the running key) with a lease of
// AtMostFor straight on the backend, not through the Client: the claim
// belongs to the trigger, not to this process, so neither the watchdog nor
// Client.Close may touch it. It outlives a dead runner by design.
func (cl *Claim) claimLeased(ctx context.Context) error {
	c := cl.c
	res, err := c.b.Acquire(ctx, driver.Request{Key: cl.key, Owner: cl.owner, Lease: c.cfg.atMost})
	if err != nil {
		c.abandon(cl.key, cl.owner)
		return c.skip(cl.trigger, Unavailable, err)
	}
	if !res.Acquired {
		return c.skip(cl.trigger, Taken, nil)
	}
	cl.token = res.Token
	if err := cl.durable(ctx); err != nil {
		return err
	}
	if c.cfg.overlap {
		return nil
	}
	res, err = c.b.Acquire(ctx, driver.Request{Key: runningKey(c.job), Owner: cl.owner, Lease: c.cfg.atMost})
	if err == nil && res.Acquired {
		cl.running = true
		return nil
	}
	// The trigger stays claimed for AtLeastFor: it is skipped everywhere,
	// and reported once, here.
	if err != nil {
		c.abandon(runningKey(c.job), cl.owner)
	}
	cl.retain()
	if err != nil {
		return c.skip(cl.trigger, Unavailable, err)
	}
	return c.skip(cl.trigger, Overlap, nil)
}

// durable backs an AtMostOnce claim with the outcome store when that is a
// BackendStore: a start mark that lives AtMostFor whatever happens to the
// lock, and the done record after it. A lock freed early — its holder's
// PostgreSQL session died, a Redis failover lost it — then still cannot let
// a late instance run the trigger again. The lock stays taken for
// AtLeastFor either way.
func (cl *Claim) durable(ctx context.Context) error {
	c := cl.c
	bs, ok := c.cfg.store.(*BackendStore)
	if !ok {
		return nil
	}
	won, err := bs.begin(ctx, Run{Job: c.job, Trigger: cl.trigger, Instance: c.cfg.instance, Token: cl.token, Started: cl.started}, c.cfg.atMost)
	if err == nil && won {
		_, ok, err = bs.Find(ctx, c.job, cl.trigger)
		if err == nil && !ok {
			return nil
		}
	}
	cl.retain()
	switch {
	case err != nil:
		return c.skip(cl.trigger, Unavailable, err)
	case !won:
		return c.skip(cl.trigger, Taken, nil)
	}
	return c.skip(cl.trigger, Done, nil)
}

// claimRenewed takes the trigger through the Client with a short lease the
// watchdog renews; a refused instance waits for the runner to finish or to
// die, and runs the trigger only if the store has no record of it.
func (cl *Claim) claimRenewed(ctx context.Context) error {
	c := cl.c
	lease := lockx.WithWatchdog(c.cfg.runnerTTL)
	l, err := c.locks.TryAcquire(ctx, cl.key, lease)
	if errors.Is(err, lockx.ErrNotAcquired) && ctx.Err() == nil {
		if done, serr := cl.done(ctx); serr != nil || done {
			return serr
		}
		l, err = c.locks.Acquire(ctx, cl.key, lease, lockx.WithWait(c.cfg.atMost+2*c.cfg.runnerTTL))
	}
	if err != nil {
		if errors.Is(err, lockx.ErrNotAcquired) && ctx.Err() == nil && !errors.Is(err, lockx.ErrUnavailable) {
			return c.skip(cl.trigger, Taken, nil)
		}
		return c.skip(cl.trigger, Unavailable, err)
	}
	if done, serr := cl.done(ctx); serr != nil || done {
		_ = l.Release(context.WithoutCancel(ctx))
		return serr
	}
	cl.lock, cl.token = l, l.Token()
	cl.started, cl.mono = c.cfg.now(), time.Now() // the run starts now, not when the wait began
	if c.cfg.overlap {
		return nil
	}
	// A dead runner's running key lapses a moment after its trigger's: wait
	// that long before calling the trigger an overlap.
	r, err := c.locks.Acquire(ctx, runningKey(c.job), lease, lockx.WithWait(2*c.cfg.runnerTTL))
	if err != nil {
		_ = l.Release(context.WithoutCancel(ctx))
		if errors.Is(err, lockx.ErrNotAcquired) && !errors.Is(err, lockx.ErrUnavailable) {
			return c.skip(cl.trigger, Overlap, nil)
		}
		return c.skip(cl.trigger, Unavailable, err)
	}
	cl.run = r
	return nil
}

// done asks the store whether the trigger has a record; it returns the skip
// error to report if it has or if the store cannot tell.
func (cl *Claim) done(ctx context.Context) (bool, error) {
	_, ok, err := cl.c.cfg.store.Find(ctx, cl.c.job, cl.trigger)
	switch {
	case err != nil:
		return true, cl.c.skip(cl.trigger, Unavailable, err)
	case ok:
		return true, cl.c.skip(cl.trigger, Done, nil)
	}
	return false, nil
}

// abandon frees a key whose acquisition had an unknown outcome; Release is
// owner-checked, so it never frees another instance's claim.
func (c *Claimer) abandon(key string, owner lockx.Owner) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = c.b.Release(ctx, key, owner)
}

func (c *Claimer) skip(trig time.Time, reason SkipReason, err error) error {
	e := &SkipError{Job: c.job, Trigger: trig, Instance: c.cfg.instance, Reason: reason, Err: err}
	if c.cfg.onSkip != nil {
		c.cfg.onSkip(e)
	}
	if l := c.cfg.logger; l != nil {
		level := slog.LevelDebug
		if reason == Unavailable {
			level = slog.LevelWarn
		}
		l.Log(context.Background(), level, "cronguard: trigger skipped", "job", c.job,
			"trigger", trig, "instance", c.cfg.instance, "reason", reason.String(), "err", err)
	}
	return e
}

type triggerCtxKey struct{}

// TriggerFromContext returns the trigger a run's context serves: the
// scheduled instant, the same on every instance. Use it to make the job's
// own writes idempotent per trigger.
func TriggerFromContext(ctx context.Context) (time.Time, bool) {
	t, ok := ctx.Value(triggerCtxKey{}).(time.Time)
	return t, ok
}
