// Package robfigcron runs robfig/cron v3 jobs once per trigger across every
// instance that schedules them, through patterns/cronguard.
//
//	c := cron.New()
//	_, err := robfigcron.AddFunc(c, locks, "nightly-report", "0 2 * * *", report,
//		cronguard.AtMostFor(time.Hour))
//	c.Start()
//
// The guarded job is a cron.Job, so it composes with cron.Chain wrappers
// (cron.Recover, cron.DelayIfStillRunning for this instance's own runs).
// Triggers are derived in the Cron's location, and their lock keys are
// written in UTC, so instances in different time zones agree.
package robfigcron

import (
	"context"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/patterns/cronguard"
)

// Job guards fn to run once per trigger of sched across the fleet and
// returns it as a cron.Job for c.Schedule(sched, job). Triggers are
// computed in loc, the Cron's location (c.Location()). Errors are those of
// cronguard.Guard.
func Job(locks *lockx.Client, name string, sched cron.Schedule, loc *time.Location,
	fn func(context.Context) error, opts ...cronguard.Option) (*cronguard.Job, error) {
	var s cronguard.Schedule
	if sched != nil { // a nil schedule is reported by Guard
		if loc == nil {
			loc = time.Local
		}
		s = inLocation{sched, loc}
	}
	return cronguard.Guard(locks, name, fn, append([]cronguard.Option{cronguard.WithSchedule(s)}, opts...)...)
}

// Schedule guards fn and adds it to c under sched, so that whichever
// instances run c, each trigger of sched runs fn once.
func Schedule(c *cron.Cron, locks *lockx.Client, name string, sched cron.Schedule,
	fn func(context.Context) error, opts ...cronguard.Option) (cron.EntryID, error) {
	if c == nil {
		return 0, &lockx.ArgError{Arg: "cron", Reason: "nil"}
	}
	job, err := Job(locks, name, sched, c.Location(), fn, opts...)
	if err != nil {
		return 0, err
	}
	return c.Schedule(sched, job), nil
}

// AddFunc parses spec with the standard parser (five fields, or a
// descriptor such as @hourly; cron.ParseStandard), guards fn and adds it to
// c. For a Cron built WithSeconds or another parser, parse the spec with
// that parser and call Schedule. A bad spec is an *lockx.ArgError.
func AddFunc(c *cron.Cron, locks *lockx.Client, name, spec string,
	fn func(context.Context) error, opts ...cronguard.Option) (cron.EntryID, error) {
	sched, err := cron.ParseStandard(spec)
	if err != nil {
		return 0, &lockx.ArgError{Arg: "spec", Reason: err.Error()}
	}
	return Schedule(c, locks, name, sched, fn, opts...)
}

// inLocation evaluates a schedule in the Cron's location, as the Cron does,
// whatever the location of the instant the guard asks about.
type inLocation struct {
	s   cron.Schedule
	loc *time.Location
}

func (l inLocation) Next(t time.Time) time.Time { return l.s.Next(t.In(l.loc)) }
