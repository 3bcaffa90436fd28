package gocronlock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/patterns/cronguard"
	"github.com/lockx-go/lockx/patterns/cronguard/gocronlock"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// The scenario of gocron issue #841: five schedulers started at different
// moments run a fast DurationJob. With a name lock the instances take turns
// and triggers run several times; with gocronlock each runs once.
func TestIssue841OncePerTrigger(t *testing.T) {
	const period = 250 * time.Millisecond
	store := memlock.New()
	records := cronguard.NewMemStore(0)
	var ran atomic.Int32
	var skips atomic.Int32
	var lockers []*gocronlock.Locker
	var scheds []gocron.Scheduler
	for i := range 5 {
		locks := lockx.New(store)
		defer locks.Close()
		// Claims kept 8 periods: robust to the test process pausing on a
		// loaded machine; the key names the trigger, so it costs nothing.
		l, err := gocronlock.New(locks, cronguard.Every(period), cronguard.WithStore(records),
			cronguard.AtLeastFor(8*period), cronguard.AtMostFor(8*period),
			cronguard.WithInstance(string(rune('A'+i))),
			cronguard.OnSkip(func(*cronguard.SkipError) { skips.Add(1) }))
		if err != nil {
			t.Fatal(err)
		}
		s, err := gocron.NewScheduler()
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.NewJob(gocron.DurationJob(period), gocron.NewTask(func() { ran.Add(1) }),
			gocron.WithName("report"), gocron.WithDistributedJobLocker(l))
		if err != nil {
			t.Fatal(err)
		}
		lockers, scheds = append(lockers, l), append(scheds, s)
	}
	for i, s := range scheds {
		s.Start()
		if i < len(scheds)-1 {
			time.Sleep(period / 7) // unaligned starts
		}
	}
	time.Sleep(16 * period)
	for _, s := range scheds {
		if err := s.Shutdown(); err != nil {
			t.Error(err)
		}
	}
	c, err := lockers[0].Claimer("report")
	if err != nil {
		t.Fatal(err)
	}
	runs, err := c.LastRuns(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	per := map[int64]int{}
	for _, r := range runs {
		per[r.Trigger.UnixNano()]++
	}
	for trig, n := range per {
		if n != 1 {
			t.Errorf("trigger %v ran %d times", time.Unix(0, trig).Format("15:04:05.000"), n)
		}
	}
	if int(ran.Load()) != len(runs) || len(per) < 8 {
		t.Errorf("%d runs, %d records, %d distinct triggers in %v; want one run per trigger", ran.Load(), len(runs), len(per), 16*period)
	}
	if skips.Load() == 0 {
		t.Errorf("no skips reported")
	}
}

func TestNewBadInput(t *testing.T) {
	locks := lockx.New(memlock.New())
	defer locks.Close()
	_, err := gocronlock.New(locks)
	if !errors.Is(err, lockx.ErrInvalidArgument) {
		t.Errorf("no schedule: %v, want an ArgError", err)
	}
	l, err := gocronlock.New(locks, cronguard.Every(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Lock(context.Background(), ""); !errors.Is(err, lockx.ErrInvalidArgument) {
		t.Errorf("empty job name: %v, want an ArgError", err)
	}
}
