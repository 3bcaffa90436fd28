// Package gocronlock is a go-co-op/gocron v2 Locker that means once per
// trigger, not merely "not at the same time".
//
// gocron asks its Locker for a lock named after the job and unlocks it when
// the run ends. A plain lock then only keeps runs apart: with a fast job the
// instances take turns and a trigger runs on several of them (gocron issue
// #841). This Locker instead claims the trigger — "cron:<job>:<scheduled
// instant>" through patterns/cronguard — and keeps the claim after Unlock
// until AtLeastFor has passed, so every other instance skips that trigger.
//
//	locker, err := gocronlock.New(locks, cronguard.Every(5*time.Minute))
//	s, _ := gocron.NewScheduler()
//	s.NewJob(gocron.DurationJob(5*time.Minute), gocron.NewTask(sync),
//		gocron.WithName("sync"), gocron.WithDistributedJobLocker(locker))
//
// A Locker serves one schedule: give each job its own Locker
// (WithDistributedJobLocker), or share one scheduler-wide
// (WithDistributedLocker) among jobs on the same schedule. Each job's name
// is its lock name, so give jobs stable names (gocron.WithName).
//
// gocron does not pass the scheduled time to a Locker, so the trigger is the
// schedule's instant nearest to the instance's clock (or the backend's, with
// cronguard.UsingBackendTime) when gocron asks. Instances need not start in
// step: every firing is mapped to the nearest instant of the epoch-aligned
// grid of cronguard.Every. Aligning DurationJobs anyway
// (gocron.WithStartAt(gocron.WithStartDateTime(next grid instant))) keeps
// each firing far from the half-way point where jitter could map it to the
// neighbouring trigger.
//
// Two limits come from gocron's interface: Unlock does not learn the job's
// error, so outcome records say only who ran which trigger, when and for how
// long; and the job's context is gocron's, so AtMostFor frees the claim but
// cannot cancel the run.
package gocronlock

import (
	"context"
	"sync"

	"github.com/go-co-op/gocron/v2"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/patterns/cronguard"
)

// Locker implements gocron.Locker with once-per-trigger semantics. It is
// safe for concurrent use.
type Locker struct {
	locks *lockx.Client
	opts  []cronguard.Option

	mu       sync.Mutex
	claimers map[string]*cronguard.Claimer // by job name
}

var _ gocron.Locker = (*Locker)(nil)

// New returns a Locker over locks for jobs on the schedule given in opts
// (cronguard.Every or cronguard.WithSchedule); the other cronguard options
// apply to every job. Bad options are an *lockx.ArgError, as for
// cronguard.NewClaimer.
func New(locks *lockx.Client, opts ...cronguard.Option) (*Locker, error) {
	if _, err := cronguard.NewClaimer(locks, "gocron", opts...); err != nil {
		return nil, err
	}
	return &Locker{locks: locks, opts: opts, claimers: make(map[string]*cronguard.Claimer)}, nil
}

// Claimer returns the claimer of the job named key, to read its outcome
// records (LastRuns).
func (l *Locker) Claimer(key string) (*cronguard.Claimer, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c := l.claimers[key]; c != nil {
		return c, nil
	}
	c, err := cronguard.NewClaimer(l.locks, key, l.opts...)
	if err != nil {
		return nil, err
	}
	l.claimers[key] = c
	return c, nil
}

// Lock implements gocron.Locker: it claims the current trigger of the job
// named key, or returns a *cronguard.SkipError (cronguard.ErrSkipped) that
// makes gocron skip this run, as for any Locker error.
func (l *Locker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	c, err := l.Claimer(key)
	if err != nil {
		return nil, err
	}
	cl, err := c.ClaimNow(ctx)
	if err != nil {
		return nil, err
	}
	return lock{cl}, nil
}

type lock struct{ cl *cronguard.Claim }

// Unlock records the run and keeps the trigger claimed until AtLeastFor.
func (l lock) Unlock(context.Context) error { return l.cl.Finish(nil) }
