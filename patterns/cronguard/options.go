package cronguard

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/lockx-go/lockx/internal/wallclock"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
)

// Delivery chooses what happens to a trigger whose runner dies mid-run.
type Delivery int

const (
	// AtMostOnce (the default) never runs a trigger twice while its claim
	// lives: the claim is taken with a lease of AtMostFor, so a runner that
	// dies mid-run keeps the trigger claimed until AtMostFor has passed and
	// the trigger is not run again before then (nor, in practice, after: by
	// then no instance asks for it any more). This is ShedLock's behaviour.
	AtMostOnce Delivery = iota
	// AtLeastOnce re-runs a trigger whose runner died: the claim is a short
	// lease the watchdog renews up to AtMostFor, the other instances wait
	// for the claim instead of skipping, and the first to get it after the
	// runner's lease ran out runs the trigger again, unless the outcome
	// store already records it as done. It needs a Store shared by the
	// fleet, and costs each non-running instance a goroutine blocked until
	// the run ends.
	AtLeastOnce
)

// Option configures a guard.
type Option func(*config)

type config struct {
	schedule    Schedule
	atMost      time.Duration
	atLeast     time.Duration
	backendTime bool
	now         func() time.Time
	store       Store
	instance    string
	onSkip      func(*SkipError)
	delivery    Delivery
	overlap     bool
	renewed     time.Duration
	logger      *slog.Logger
	err         error

	// derived by build
	period     time.Duration
	clock      driver.Clock
	runnerTTL  time.Duration // AtLeastOnce: the renewed lease
	resolution time.Duration
}

func (c *config) fail(arg, reason string) {
	if c.err == nil {
		c.err = &lockx.ArgError{Arg: arg, Reason: reason}
	}
}

func positive(c *config, arg string, d time.Duration) bool {
	if d <= 0 {
		c.fail(arg, "must be positive")
		return false
	}
	return true
}

// Every sets an interval schedule: a trigger every d on the grid of
// multiples of d since the Unix epoch (every minute on the minute, every
// 250 ms on the quarter second), whatever time each instance started.
func Every(d time.Duration) Option {
	return func(c *config) {
		if positive(c, "interval", d) {
			c.schedule = interval(d)
		}
	}
}

// WithSchedule sets the job's schedule, such as a parsed cron expression.
func WithSchedule(s Schedule) Option {
	return func(c *config) {
		if s == nil {
			c.fail("schedule", "nil")
			return
		}
		c.schedule = s
	}
}

// AtMostFor sets the ceiling of a run: its context is cancelled with cause
// ErrAtMostFor once d has passed since the claim, and a runner that died
// leaves the trigger claimed for d (and, unless AllowOverlap, the job's
// later triggers skipped as Overlap). Default: AtLeastFor. Set it above the
// longest run you expect.
func AtMostFor(d time.Duration) Option {
	return func(c *config) {
		if positive(c, "AtMostFor", d) {
			c.atMost = d
		}
	}
}

// AtLeastFor sets how long a trigger's claim is kept after the claim was
// taken, however fast the run: instances that fire later for the same
// trigger (a clock behind, a timer late, a process paused) find it claimed
// and skip. As the key names the trigger, keeping it never delays the next
// trigger, so the default is generous: two periods (capped by an explicit
// AtMostFor), which covers clocks that differ by up to half a period either
// way plus a period of scheduling delay. Exactly once per trigger holds as
// long as every instance's attempt at a trigger comes within AtLeastFor of
// the first.
func AtLeastFor(d time.Duration) Option {
	return func(c *config) {
		if positive(c, "AtLeastFor", d) {
			c.atLeast = d
		}
	}
}

// UsingBackendTime derives triggers from the backend's clock (Redis TIME,
// PostgreSQL now()) instead of the instance's, like ShedLock's
// usingDbTime: for fleets whose clocks cannot be trusted. The backend must
// implement Clock. It applies to Run; RunAt trusts the time it is given.
func UsingBackendTime() Option { return func(c *config) { c.backendTime = true } }

// WithClock sets the instance's clock (default time.Now), from which Run
// derives the trigger and Started is recorded.
func WithClock(now func() time.Time) Option {
	return func(c *config) {
		if now == nil {
			c.fail("clock", "nil")
			return
		}
		c.now = now
	}
}

// WithStore sets the outcome store. Default: a MemStore of the guard's own.
func WithStore(s Store) Option {
	return func(c *config) {
		if s == nil {
			c.fail("store", "nil")
			return
		}
		c.store = s
	}
}

// WithInstance names this instance in outcome records and skip reports.
// Default: host name and process id.
func WithInstance(name string) Option {
	return func(c *config) {
		if name == "" {
			c.fail("instance", "empty")
			return
		}
		c.instance = name
	}
}

// OnSkip sets a hook called, synchronously, for every trigger this
// instance skips. Skips are never silent: without a hook they are still
// returned by RunAt and logged at debug level (Unavailable at warn level)
// through WithLogger.
func OnSkip(f func(*SkipError)) Option { return func(c *config) { c.onSkip = f } }

// WithDelivery chooses AtMostOnce (default) or AtLeastOnce.
func WithDelivery(d Delivery) Option {
	return func(c *config) {
		if d != AtMostOnce && d != AtLeastOnce {
			c.fail("delivery", fmt.Sprintf("unknown value %d", int(d)))
			return
		}
		c.delivery = d
	}
}

// RenewedLease sets, under AtLeastOnce, the lease the watchdog renews while
// a trigger runs: a runner that dies is replaced about d later, and a
// runner paused (or cut off from the store) for longer than d loses its
// claim and may see the trigger run again. Default: a quarter of the
// period, at least 1 s and at most 30 s and AtMostFor.
func RenewedLease(d time.Duration) Option {
	return func(c *config) {
		if positive(c, "RenewedLease", d) {
			c.renewed = d
		}
	}
}

// AllowOverlap lets a trigger run while a previous trigger's run of the
// same job is still running (on any instance). By default such a trigger
// is skipped with reason Overlap, as ShedLock's single lock would.
func AllowOverlap() Option { return func(c *config) { c.overlap = true } }

// WithLogger sets the logger for skips and failures to record outcomes.
// The guard is silent by default.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// build applies opts and derives the defaults for job on locks.
func build(locks *lockx.Client, job string, opts []Option) (config, error) {
	c := config{now: wallclock.Now}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	switch {
	case c.err != nil:
	case locks == nil:
		c.fail("client", "nil")
	case job == "":
		c.fail("job", "empty")
	case len(recordKey(lostKind, job, time.Date(2000, 1, 1, 0, 0, 0, 1, time.UTC))) > lockx.DefaultMaxKeyLen:
		c.fail("job", fmt.Sprintf("%d bytes, too long for a lock key", len(job)))
	case c.schedule == nil:
		c.fail("schedule", "missing: give Every or WithSchedule")
	}
	if c.err != nil {
		return c, c.err
	}
	b := locks.Backend()
	driver.As(b, &c.clock)
	c.resolution = resolution(b)
	c.period = period(c.schedule)
	switch {
	case c.period == 0:
		c.fail("schedule", "fires at most once: nothing to guard per trigger")
	case c.period < c.resolution:
		c.fail("schedule", fmt.Sprintf("triggers %v apart, finer than the backend's clock resolution %v", c.period, c.resolution))
	case c.backendTime && c.clock == nil:
		c.fail("UsingBackendTime", fmt.Sprintf("backend %T does not implement driver.Clock", b))
	case c.atMost > 0 && c.atLeast > c.atMost:
		c.fail("AtLeastFor", fmt.Sprintf("%v is longer than AtMostFor %v", c.atLeast, c.atMost))
	case c.delivery == AtLeastOnce && c.store == nil:
		c.fail("store", "AtLeastOnce needs a Store shared by the fleet (WithStore)")
	}
	if c.err != nil {
		return c, c.err
	}
	if c.atLeast == 0 {
		c.atLeast = 2 * c.period
		if c.atMost > 0 && c.atMost < c.atLeast {
			c.atLeast = c.atMost
		}
	}
	if c.atMost == 0 {
		c.atMost = c.atLeast
	}
	if c.atLeast < c.resolution || c.atMost < c.resolution {
		c.fail("AtLeastFor", fmt.Sprintf("shorter than the backend's clock resolution %v", c.resolution))
		return c, c.err
	}
	// Short enough that a dead runner is replaced within a fraction of the
	// period, long enough (1 s) that a renewal delayed by a loaded machine
	// or network is not taken for a death.
	c.runnerTTL = min(max(c.period/4, time.Second), lockx.DefaultLease, c.atMost)
	if c.renewed > 0 {
		if c.renewed > c.atMost {
			c.fail("RenewedLease", fmt.Sprintf("%v is longer than AtMostFor %v", c.renewed, c.atMost))
			return c, c.err
		}
		c.runnerTTL = c.renewed
	}
	if c.store == nil {
		c.store = NewMemStore(0)
	}
	if c.instance == "" {
		host, _ := os.Hostname()
		c.instance = host + ":" + strconv.Itoa(os.Getpid())
	}
	return c, nil
}
