package cronguard

import (
	"fmt"
	"time"
)

// Schedule tells the guard when a job's triggers fall. robfig/cron's
// cron.Schedule satisfies it, so a parsed cron expression can be passed as
// it is (see package robfigcron).
type Schedule interface {
	// Next returns the first trigger strictly after t, or the zero time if
	// there is none.
	Next(t time.Time) time.Time
}

// interval fires every d, on the grid of multiples of d since the Unix
// epoch: every instance derives the same triggers whatever its start time
// (the remedy of gocron PR #463, built in).
type interval time.Duration

// Next implements Schedule.
func (d interval) Next(t time.Time) time.Time {
	p := int64(d)
	n := t.UnixNano()
	k := n / p
	if n < 0 && n%p != 0 {
		k-- // floor division for instants before 1970
	}
	return time.Unix(0, (k+1)*p).UTC()
}

// nearest returns the trigger of s nearest to t: the instant a scheduler
// meant when it fired at t by a clock that runs early or late, or whose
// timer fired late, by less than half a period. Past the schedule's last
// trigger, that trigger is still the one meant for half of per (the
// schedule's period) after it: the last trigger of a schedule that ends is
// claimed like any other.
func nearest(s Schedule, t time.Time, per time.Duration) (time.Time, error) {
	next := s.Next(t)
	// The last trigger at or before t, if it is no farther from t than next
	// (or than half a period, when there is no next): the first trigger
	// after t-reach is it, or a trigger before it.
	reach := per / 2
	if !next.IsZero() {
		reach = next.Sub(t)
	}
	var prev time.Time
	for p, i := s.Next(t.Add(-reach-1)), 0; !p.IsZero() && !p.After(t) && i < 1000; p, i = s.Next(p), i+1 {
		prev = p
	}
	switch {
	case !prev.IsZero():
		return prev, nil // at most as far as next: a tie goes to the earlier
	case !next.IsZero():
		return next, nil
	}
	return time.Time{}, fmt.Errorf("cronguard: schedule has no trigger after %v", t.Add(-reach))
}

// periodOrigin is where period starts reading a schedule: a fixed instant,
// not the clock. Whether a schedule is accepted, and the defaults derived
// from its period, are then properties of the schedule alone, the same on
// every instance and on every day: a schedule with one trigger left, or
// none, is still a schedule (see docs/patterns/cronguard.md, "Schedules").
// time.Unix gives it the local zone, as time.Now would, so a schedule that
// reads its argument's zone sees the same zone it will run in.
var periodOrigin = time.Unix(0, 0)

// period returns the shortest gap between the first few triggers of s:
// the schedule's precision, from which the defaults are derived; 0 if s
// fires at most once.
func period(s Schedule) time.Duration {
	if d, ok := s.(interval); ok {
		return time.Duration(d)
	}
	var shortest time.Duration
	t := s.Next(periodOrigin)
	for i := 0; i < 16 && !t.IsZero(); i++ {
		n := s.Next(t)
		if n.IsZero() {
			break
		}
		if g := n.Sub(t); g > 0 && (shortest == 0 || g < shortest) {
			shortest = g
		}
		t = n
	}
	return shortest
}

// triggerKey names the lock of one trigger. The time is UTC with as many
// fractional digits as it has (RFC 3339), so a minutely job's key ends in
// ":00Z" and timezones never enter the name (ShedLock issues #91, #185).
func triggerKey(job string, trigger time.Time) string {
	return "cron:" + job + ":" + trigger.UTC().Format(time.RFC3339Nano)
}

// runningKey names the lock a run of job holds while it runs, so that a
// slow run makes the next trigger skip instead of overlapping it. A trigger
// time never starts with a letter, so it cannot collide with a trigger key.
func runningKey(job string) string { return "cron:" + job + ":running" }
