package cronguard_test

import (
	"context"
	"errors"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/patterns/cronguard"
)

func newLocks(t *testing.T) *lockx.Client {
	c := lockx.New(memlock.New())
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func nop(context.Context) error { return nil }

// noClock hides memlock's Clock capability.
type noClock struct{ driver.Backend }

func TestGuardBadInput(t *testing.T) {
	t.Parallel()
	locks := newLocks(t)
	coarse := lockx.New(noClock{memlock.New()}) // assumed 1 ms resolution
	defer coarse.Close()
	cases := []struct {
		name  string
		locks *lockx.Client
		job   string
		fn    func(context.Context) error
		opts  []cronguard.Option
		arg   string
	}{
		{"nil client", nil, "j", nop, []cronguard.Option{cronguard.Every(time.Second)}, "client"},
		{"empty job", locks, "", nop, []cronguard.Option{cronguard.Every(time.Second)}, "job"},
		{"long job", locks, string(make([]byte, 600)), nop, []cronguard.Option{cronguard.Every(time.Second)}, "job"},
		{"nil fn", locks, "j", nil, []cronguard.Option{cronguard.Every(time.Second)}, "fn"},
		{"no schedule", locks, "j", nop, nil, "schedule"},
		{"nil schedule", locks, "j", nop, []cronguard.Option{cronguard.WithSchedule(nil)}, "schedule"},
		{"zero interval", locks, "j", nop, []cronguard.Option{cronguard.Every(0)}, "interval"},
		{"finer than resolution", coarse, "j", nop, []cronguard.Option{cronguard.Every(500 * time.Microsecond)}, "schedule"},
		{"AtLeastFor > AtMostFor", locks, "j", nop, []cronguard.Option{cronguard.Every(time.Minute),
			cronguard.AtLeastFor(2 * time.Minute), cronguard.AtMostFor(time.Minute)}, "AtLeastFor"},
		{"negative AtMostFor", locks, "j", nop, []cronguard.Option{cronguard.Every(time.Minute), cronguard.AtMostFor(-1)}, "AtMostFor"},
		{"backend time without Clock", coarse, "j", nop, []cronguard.Option{cronguard.Every(time.Minute), cronguard.UsingBackendTime()}, "UsingBackendTime"},
		{"AtLeastOnce without store", locks, "j", nop, []cronguard.Option{cronguard.Every(time.Minute), cronguard.WithDelivery(cronguard.AtLeastOnce)}, "store"},
		{"RenewedLease > AtMostFor", locks, "j", nop, []cronguard.Option{cronguard.Every(time.Minute), cronguard.AtMostFor(time.Minute),
			cronguard.RenewedLease(2 * time.Minute)}, "RenewedLease"},
		{"unknown delivery", locks, "j", nop, []cronguard.Option{cronguard.Every(time.Minute), cronguard.WithDelivery(7)}, "delivery"},
		{"nil clock", locks, "j", nop, []cronguard.Option{cronguard.Every(time.Minute), cronguard.WithClock(nil)}, "clock"},
		{"empty instance", locks, "j", nop, []cronguard.Option{cronguard.Every(time.Minute), cronguard.WithInstance("")}, "instance"},
		{"one-shot schedule", locks, "j", nop, []cronguard.Option{cronguard.WithSchedule(listSchedule{time.Now().Add(time.Hour)})}, "schedule"},
	}
	for _, tc := range cases {
		_, err := cronguard.Guard(tc.locks, tc.job, tc.fn, tc.opts...)
		var ae *lockx.ArgError
		if !errors.As(err, &ae) || ae.Arg != tc.arg || !errors.Is(err, lockx.ErrInvalidArgument) {
			t.Errorf("%s: got %v, want an *lockx.ArgError for %q", tc.name, err, tc.arg)
		}
	}
}

// listSchedule fires at the given instants.
type listSchedule []time.Time

func (l listSchedule) Next(t time.Time) time.Time {
	i := sort.Search(len(l), func(i int) bool { return l[i].After(t) })
	if i == len(l) {
		return time.Time{}
	}
	return l[i]
}

func TestTriggerIsNearest(t *testing.T) {
	t.Parallel()
	locks := newLocks(t)
	// 9:00 today, whatever day the test runs: the claimer measures the
	// schedule, so the list must still have triggers ahead of the real clock.
	day := time.Now().UTC().Truncate(24 * time.Hour).Add(9 * time.Hour)
	// Weekdays at 9:00, day playing the Friday: irregular gaps.
	weekdays := listSchedule{day.AddDate(0, 0, -1), day, day.AddDate(0, 0, 3), day.AddDate(0, 0, 4), day.AddDate(0, 0, 5)}
	c, err := cronguard.NewClaimer(locks, "weekdays", cronguard.WithSchedule(weekdays))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ at, want time.Time }{
		{day, day},
		{day.Add(-time.Minute), day},    // a clock running early
		{day.Add(3 * time.Minute), day}, // late
		{day.Add(30 * time.Hour), day},  // Saturday: still nearer Friday
		{day.AddDate(0, 0, 3).Add(-time.Hour), day.AddDate(0, 0, 3)}, // Monday 8:00
	} {
		if got, err := c.Trigger(tc.at); err != nil || !got.Equal(tc.want) {
			t.Errorf("Trigger(%v) = %v, %v; want %v", tc.at, got, err, tc.want)
		}
	}

	every, err := cronguard.NewClaimer(locks, "every", cronguard.Every(250*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)
	for _, off := range []time.Duration{-124 * time.Millisecond, 0, 124 * time.Millisecond} {
		if got, _ := every.Trigger(base.Add(off)); !got.Equal(base) {
			t.Errorf("Every(250ms).Trigger(base%+v) = %v, want base", off, got)
		}
	}
	if got, _ := every.Trigger(base.Add(126 * time.Millisecond)); !got.Equal(base.Add(250 * time.Millisecond)) {
		t.Errorf("past half a period: %v, want the next trigger", got)
	}
}

// A schedule is judged by its own triggers, never by the day the claimer is
// built: one with a single trigger left (or none) is accepted and its last
// trigger is claimed like the others, a one-shot schedule is refused on any
// day, and the verdict is the same for claimers whose clocks stand decades
// apart.
func TestScheduleJudgedByItsTriggers(t *testing.T) {
	t.Parallel()
	locks := newLocks(t)
	now := time.Now()
	last := now.Add(time.Hour)
	ending := listSchedule{last.Add(-2 * time.Hour), last.Add(-time.Hour), last} // hourly, one trigger left
	ended := listSchedule{now.Add(-2 * time.Hour), now.Add(-time.Hour)}
	oneShot := listSchedule{last}
	for _, clock := range []time.Time{now, now.AddDate(-30, 0, 0), now.AddDate(30, 0, 0)} {
		at := cronguard.WithClock(func() time.Time { return clock })
		for name, s := range map[string]listSchedule{"ending": ending, "ended": ended} {
			if _, err := cronguard.NewClaimer(locks, name, cronguard.WithSchedule(s), at); err != nil {
				t.Errorf("clock at %v: %s schedule refused: %v", clock, name, err)
			}
		}
		_, err := cronguard.NewClaimer(locks, "once", cronguard.WithSchedule(oneShot), at)
		var ae *lockx.ArgError
		if !errors.As(err, &ae) || ae.Arg != "schedule" {
			t.Errorf("clock at %v: one-shot schedule: %v, want an *lockx.ArgError for \"schedule\"", clock, err)
		}
	}

	c, err := cronguard.NewClaimer(locks, "ending", cronguard.WithSchedule(ending))
	if err != nil {
		t.Fatal(err)
	}
	// The last trigger is the one meant up to half a period after it.
	for _, at := range []time.Time{last.Add(-29 * time.Minute), last, last.Add(29 * time.Minute)} {
		if got, err := c.Trigger(at); err != nil || !got.Equal(last) {
			t.Errorf("Trigger(last%+v) = %v, %v; want the last trigger", at.Sub(last), got, err)
		}
	}
	ctx := context.Background()
	cl, err := c.Claim(ctx, last.Add(time.Minute))
	if err != nil || !cl.Trigger().Equal(last) {
		t.Fatalf("claim of the last trigger: %v, %v", cl, err)
	}
	if err := cl.Finish(nil); err != nil {
		t.Fatal(err)
	}
	var se *cronguard.SkipError
	if _, err := c.Claim(ctx, last.Add(time.Hour)); !errors.As(err, &se) || se.Reason != cronguard.Unavailable {
		t.Errorf("claim an hour past the schedule's end: %v, want an Unavailable skip", err)
	}
}

func TestSkipReportedAndRecord(t *testing.T) {
	t.Parallel()
	locks := newLocks(t)
	var skips []*cronguard.SkipError
	var ran atomic.Int32
	trig := time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)
	job, err := cronguard.Guard(locks, "report", func(ctx context.Context) error {
		ran.Add(1)
		if got, ok := cronguard.TriggerFromContext(ctx); !ok || !got.Equal(trig) {
			t.Errorf("TriggerFromContext = %v, %v; want %v", got, ok, trig)
		}
		return errors.New("boom")
	}, cronguard.Every(time.Minute), cronguard.WithInstance("a"),
		cronguard.OnSkip(func(e *cronguard.SkipError) { skips = append(skips, e) }))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := job.RunAt(ctx, trig.Add(time.Second)); err == nil || err.Error() != "boom" {
		t.Fatalf("first run: %v, want the job's error", err)
	}
	err = job.RunAt(ctx, trig.Add(-time.Second))
	if !errors.Is(err, cronguard.ErrSkipped) || len(skips) != 1 || skips[0].Reason != cronguard.Taken || skips[0].Instance != "a" {
		t.Fatalf("second run: %v, skips %v; want one Taken skip", err, skips)
	}
	runs, err := job.LastRuns(ctx, 10)
	if err != nil || len(runs) != 1 {
		t.Fatalf("LastRuns: %v, %v", runs, err)
	}
	r := runs[0]
	if !r.Trigger.Equal(trig) || r.Instance != "a" || r.Error != "boom" || r.Succeeded() || r.Token == 0 || r.Job != "report" {
		t.Errorf("record %+v", r)
	}
}

func TestAtMostForCancelsRun(t *testing.T) {
	t.Parallel()
	locks := newLocks(t)
	var cause error
	job, err := cronguard.Guard(locks, "slow", func(ctx context.Context) error {
		<-ctx.Done()
		cause = context.Cause(ctx)
		return nil
	}, cronguard.Every(time.Second), cronguard.AtMostFor(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = job.RunAt(context.Background(), start)
	if d := time.Since(start); !errors.Is(cause, cronguard.ErrAtMostFor) || !errors.Is(err, cronguard.ErrAtMostFor) || d > time.Second {
		t.Errorf("cause %v, err %v after %v; want ErrAtMostFor at 100ms", cause, err, d)
	}
	runs, _ := job.LastRuns(context.Background(), 1)
	if len(runs) != 1 || runs[0].Error != cronguard.ErrAtMostFor.Error() {
		t.Errorf("record %+v", runs)
	}
}

// failingClock is a backend whose clock cannot be read.
type failingClock struct{ *memlock.Backend }

func (failingClock) Now(context.Context) (time.Time, error) {
	return time.Time{}, driver.Unavailable("time", errors.New("down"))
}

func TestUnavailableSkip(t *testing.T) {
	t.Parallel()
	locks := lockx.New(failingClock{memlock.New()})
	defer locks.Close()
	var reason cronguard.SkipReason
	job, err := cronguard.Guard(locks, "j", nop, cronguard.Every(time.Second), cronguard.UsingBackendTime(),
		cronguard.OnSkip(func(e *cronguard.SkipError) { reason = e.Reason }))
	if err != nil {
		t.Fatal(err)
	}
	err = job.RunNow(context.Background())
	if !errors.Is(err, cronguard.ErrSkipped) || !errors.Is(err, lockx.ErrUnavailable) || reason != cronguard.Unavailable {
		t.Errorf("got %v (reason %v), want an Unavailable skip", err, reason)
	}
}
