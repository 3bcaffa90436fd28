// Package cronguard makes a scheduled job run exactly once per trigger
// across every instance that schedules it — not merely "not at the same
// time", which is all a lock on the job's name gives (gocron issue #841).
//
//	locks := lockx.New(redislock.New(rdb))
//	job, err := cronguard.Guard(locks, "nightly-report", report,
//		cronguard.Every(24*time.Hour), cronguard.AtMostFor(2*time.Hour))
//	...
//	scheduler.Add(job.Run) // on every instance
//
// # Once per trigger
//
// When an instance fires, the guard names the trigger it fires for: the
// instant of the schedule nearest to the scheduled time (RunAt) or to the
// clock (Run). Instances whose clocks or timers differ by less than half a
// period name the same trigger. The guard then makes one attempt at the
// lock "cron:<job>:<trigger in RFC 3339 UTC>": the instance that gets it
// runs the job, every other one skips, and the lock is not released after a
// fast run but kept until AtLeastFor after it was taken, so that an
// instance firing late for the same trigger still finds it taken. The key
// names the trigger, so keeping it never delays the next trigger: the next
// trigger is another key.
//
// # Leases: AtMostFor and AtLeastFor
//
// AtMostFor is the ceiling of a run: the run's context is cancelled with
// cause ErrAtMostFor when it is reached, and a runner that died leaves its
// trigger claimed for AtMostFor. AtLeastFor is how long a trigger stays
// claimed after a fast run. Defaults: AtLeastFor two periods, AtMostFor
// equal to AtLeastFor.
//
// # At most once or at least once
//
// By default (AtMostOnce) a trigger whose runner dies mid-run is not run
// again: its claim lives until AtMostFor. WithDelivery(AtLeastOnce) keeps
// the claim alive with a short renewed lease instead, makes the other
// instances wait for the run to end, and lets the first of them run the
// trigger again if the runner died before recording the outcome in a Store
// shared by the fleet.
//
// # Overlap
//
// A run that outlasts the period would overlap the next trigger's run. By
// default the next trigger is skipped (reason Overlap), as ShedLock's single
// lock would do; AllowOverlap lets runs of consecutive triggers overlap.
//
// # Skips and outcomes
//
// A skip is never silent: RunAt returns a *SkipError (ErrSkipped) and the
// OnSkip hook receives it, with the reason — Taken, Done, Overlap, or
// Unavailable, the one to alert on because the trigger may then run
// nowhere. Every run is recorded in a Store (who, when, how long, error),
// readable with LastRuns: a MemStore of the guard's own by default, or a
// BackendStore that keeps the records in the backend for the whole fleet.
//
// # Schedules
//
// A schedule is judged by its own triggers, read from a fixed origin (the
// Unix epoch), never by the clock at construction: the period, from which
// AtLeastFor and the other defaults derive, is the shortest gap between its
// first triggers. A schedule that fires at most once is refused (there is
// nothing to guard per trigger); one with a single trigger left is not — a
// users' schedule about to end is not a bad argument. Its last trigger is
// claimed like any other, by instances firing up to half a period after it.
//
// # Clocks
//
// UsingBackendTime names triggers by the store's clock (Redis TIME,
// PostgreSQL now()), through the driver.Clock capability a backend implements.
//
// See docs/patterns/cronguard.md for the guarantee, its assumptions and a
// comparison with ShedLock; packages robfigcron and gocronlock adapt
// robfig/cron v3 and go-co-op/gocron v2.
package cronguard
