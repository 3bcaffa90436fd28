package memlock

import (
	"slices"
	"time"
)

// due is the earliest time at which a lease or queue entry of a pattern
// entry (rwEntry, semEntry) may have ended — a lower bound, since renewals
// only move ends later — so that expired holds and queue entries are swept
// when something may have expired, not at every call.
type due struct {
	holds, queue time.Time // zero: none
}

func earlier(at *time.Time, t time.Time) {
	if at.IsZero() || t.Before(*at) {
		*at = t
	}
}

// hold notes a lease ending at t.
func (d *due) hold(t time.Time) { earlier(&d.holds, t) }

// queued notes a queue entry ending at t.
func (d *due) queued(t time.Time) { earlier(&d.queue, t) }

// passed reports whether at is set and not after now.
func passed(at, now time.Time) bool { return !at.IsZero() && !now.Before(at) }

// left is the time from now until at (0 if at is unset or past): a bound for
// a waiter's backoff.
func left(at, now time.Time) time.Duration {
	if at.IsZero() {
		return 0
	}
	return max(at.Sub(now), 0)
}

// sweepQueue drops the entries of q that have ended by now, calling drop for
// each, if one may have: it recomputes d.queue from the entries kept.
func sweepQueue[W interface{ ends() time.Time }](d *due, q []W, now time.Time, drop func(W)) []W {
	if !passed(d.queue, now) {
		return q
	}
	d.queue = time.Time{}
	return slices.DeleteFunc(q, func(w W) bool {
		if now.Before(w.ends()) {
			d.queued(w.ends())
			return false
		}
		drop(w)
		return true
	})
}
