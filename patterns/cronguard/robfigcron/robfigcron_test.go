package robfigcron_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/patterns/cronguard"
	"github.com/lockx-go/lockx/patterns/cronguard/robfigcron"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// Five Crons in different time zones run an every-second job for a few
// seconds: each second runs once.
func TestFiveCronsOncePerSecond(t *testing.T) {
	store := memlock.New()
	var mu sync.Mutex
	runs := map[int64]int{}
	fn := func(ctx context.Context) error {
		trig, _ := cronguard.TriggerFromContext(ctx)
		mu.Lock()
		runs[trig.Unix()]++
		mu.Unlock()
		return nil
	}
	zones := []string{"UTC", "Asia/Tokyo", "America/New_York", "Europe/Berlin", "Asia/Kolkata"}
	parser := cron.NewParser(cron.Second | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)
	sched, err := parser.Parse("* * * * * *")
	if err != nil {
		t.Fatal(err)
	}
	var crons []*cron.Cron
	for i, z := range zones {
		loc, err := time.LoadLocation(z)
		if err != nil {
			t.Skipf("no tzdata: %v", err)
		}
		locks := lockx.New(store)
		defer locks.Close()
		c := cron.New(cron.WithLocation(loc), cron.WithParser(parser))
		if _, err := robfigcron.Schedule(c, locks, "tick", sched, fn, cronguard.WithInstance(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
		crons = append(crons, c)
	}
	start := time.Now()
	for _, c := range crons {
		c.Start()
	}
	time.Sleep(3500 * time.Millisecond)
	for _, c := range crons {
		<-c.Stop().Done()
	}
	mu.Lock()
	defer mu.Unlock()
	if len(runs) < 2 {
		t.Errorf("only %d triggers ran in 3.5 s", len(runs))
	}
	for sec, n := range runs {
		if n != 1 {
			t.Errorf("second %v ran %d times", time.Unix(sec, 0).Sub(start), n)
		}
	}
}

func TestBadInput(t *testing.T) {
	locks := lockx.New(memlock.New())
	defer locks.Close()
	c := cron.New()
	for _, tc := range []struct {
		c    *cron.Cron
		job  string
		spec string
		arg  string
	}{
		{c, "j", "not a spec", "spec"},
		{nil, "j", "@hourly", "cron"},
		{c, "", "@hourly", "job"},
	} {
		_, err := robfigcron.AddFunc(tc.c, locks, tc.job, tc.spec, func(context.Context) error { return nil })
		var ae *lockx.ArgError
		if !errors.As(err, &ae) || ae.Arg != tc.arg {
			t.Errorf("AddFunc(%q, %q): %v, want an ArgError for %s", tc.job, tc.spec, err, tc.arg)
		}
	}
	if len(c.Entries()) != 0 {
		t.Errorf("bad input added entries")
	}
}
