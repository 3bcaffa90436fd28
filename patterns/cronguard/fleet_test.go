package cronguard_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/patterns/cronguard"
)

// fleet is a test of instances that each run their own scheduler loop on a
// skewed clock and share a lock store.
type fleet struct {
	period   time.Duration
	triggers int
	skews    []float64 // how far each instance's clock is ahead, in periods
	// how an instance tells the guard which trigger it fires for:
	// "scheduled" (RunAt), "now" (RunNow, own clock), "backend"
	// (UsingBackendTime), "atleastonce" (RunAt under AtLeastOnce)
	mode    string
	jobTime time.Duration
	opts    []cronguard.Option

	name string // scenario, prefixed to messages

	mu          sync.Mutex
	runs        map[int64]int // by trigger, Unix ns
	skips       map[int64][]cronguard.SkipReason
	active      int
	unavailable []string // skip messages
	maxActive   int
	store       *cronguard.MemStore
	late        map[int][]time.Duration // by trigger index: how late each instance fired
}

func newFleet(name string, period time.Duration, triggers int, mode string) *fleet {
	return &fleet{name: name,
		period: period, triggers: triggers, mode: mode,
		skews: []float64{-0.45, -0.2, 0, 0.2, 0.45},
		runs:  make(map[int64]int), skips: make(map[int64][]cronguard.SkipReason),
		late:  make(map[int][]time.Duration),
		store: cronguard.NewMemStore(1000),
	}
}

func (f *fleet) job(ctx context.Context) error {
	trig, ok := cronguard.TriggerFromContext(ctx)
	if !ok {
		return errors.New("no trigger in context")
	}
	f.mu.Lock()
	f.runs[trig.UnixNano()]++
	f.active++
	f.maxActive = max(f.maxActive, f.active)
	f.mu.Unlock()
	t := time.NewTimer(f.jobTime)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	f.mu.Lock()
	f.active--
	f.mu.Unlock()
	return nil
}

func (f *fleet) onSkip(e *cronguard.SkipError) {
	f.mu.Lock()
	f.skips[e.Trigger.UnixNano()] = append(f.skips[e.Trigger.UnixNano()], e.Reason)
	if e.Reason == cronguard.Unavailable {
		f.unavailable = append(f.unavailable, e.Error())
	}
	f.mu.Unlock()
}

// run starts one scheduler loop per client and returns the first trigger
// once every loop has fired for every trigger and every run has ended.
func (f *fleet) run(t *testing.T, name string, clients []*lockx.Client) time.Time {
	t.Helper()
	// Start on the grid, two periods after the instance furthest ahead
	// fires, so that every instance sees every trigger.
	ahead := time.Duration(max(slices.Max(f.skews), 0) * float64(f.period))
	first := time.Now().Add(ahead).Truncate(f.period).Add(2 * f.period)
	var wg sync.WaitGroup
	for i, locks := range clients {
		skew := time.Duration(f.skews[i%len(f.skews)] * float64(f.period))
		clock := func() time.Time { return time.Now().Add(skew) }
		opts := append([]cronguard.Option{cronguard.Every(f.period), cronguard.WithClock(clock),
			cronguard.WithInstance(fmt.Sprintf("i%d(%+v)", i, skew)), cronguard.WithStore(f.store),
			cronguard.OnSkip(f.onSkip)}, f.opts...)
		switch f.mode {
		case "backend", "backend5s":
			opts = append(opts, cronguard.UsingBackendTime())
		case "atleastonce":
			opts = append(opts, cronguard.WithDelivery(cronguard.AtLeastOnce))
		}
		job, err := cronguard.Guard(locks, name, f.job, opts...)
		if err != nil {
			t.Errorf("%s: %v", f.name, err)
			return first
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var runs sync.WaitGroup
			defer runs.Wait()
			for k := range f.triggers {
				scheduled := first.Add(time.Duration(k) * f.period) // by this instance's clock
				time.Sleep(time.Until(scheduled.Add(-skew)))
				f.mu.Lock()
				f.late[k] = append(f.late[k], time.Since(scheduled.Add(-skew)).Round(time.Millisecond))
				f.mu.Unlock()
				runs.Add(1)
				go func() {
					defer runs.Done()
					// A bound, so that a store that hangs fails the test, not the binary.
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					var err error
					if f.mode == "scheduled" || f.mode == "atleastonce" {
						err = job.RunAt(ctx, scheduled)
					} else {
						err = job.RunNow(ctx)
					}
					if err != nil && !errors.Is(err, cronguard.ErrSkipped) {
						t.Errorf("%s: instance %d, trigger %d: %v", f.name, i, k, err)
					}
				}()
			}
		}()
	}
	wg.Wait()
	return first
}

// checkOnce asserts that every trigger ran exactly once and nothing else
// ran. A trigger that ran nowhere fails the test with how late each
// instance fired for it: a firing names the trigger nearest to the clock it
// reads, so only a firing more than half a period late (a test process
// paused for 500 ms on a 1 s schedule) can name the next trigger instead.
//
// Instances that name the trigger by the store's clock (modes "backend")
// fire on their own clocks: one that runs early or late names the trigger
// the store's clock is nearest to, which may lie outside the test's range.
// Such runs are not strays, but no trigger may run twice either way.
func (f *fleet) checkOnce(t *testing.T, first time.Time) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for k := range f.triggers {
		trig := first.Add(time.Duration(k) * f.period).UnixNano()
		if n := f.runs[trig]; n != 1 {
			t.Errorf("%s: trigger %d (%v): ran %d times, skips %v; the instances fired %v late", f.name, k,
				time.Unix(0, trig).Format("15:04:05.000"), n, f.skips[trig], f.late[k])
		}
	}
	if strings.HasPrefix(f.mode, "backend") {
		for _, msg := range f.unavailable {
			t.Errorf("%s: %s", f.name, msg)
		}
	} else {
		f.checkNoStray(t, first)
	}
	for trig, n := range f.runs {
		if n > 1 {
			t.Errorf("%s: trigger %v ran %d times", f.name, time.Unix(0, trig).Format("15:04:05.000"), n)
		}
	}
}

// checkNoStray fails on runs of triggers outside the test's range (a
// mis-derived trigger) and on any Unavailable skip. f.mu is held.
func (f *fleet) checkNoStray(t *testing.T, first time.Time) {
	t.Helper()
	lo, hi := first.UnixNano(), first.Add(time.Duration(f.triggers-1)*f.period).UnixNano()
	var stray []string
	for trig, n := range f.runs {
		if trig < lo || trig > hi {
			stray = append(stray, fmt.Sprintf("%v×%d", time.Unix(0, trig).Format("15:04:05.000"), n))
		}
	}
	sort.Strings(stray)
	if len(stray) > 0 {
		t.Errorf("%s: runs of triggers outside the test: %v", f.name, stray)
	}
	for _, msg := range f.unavailable {
		t.Errorf("%s: %s", f.name, msg)
	}
}

// checkStore asserts that the shared outcome store has one successful
// record per run.
func (f *fleet) checkStore(t *testing.T, job string) {
	t.Helper()
	runs, err := f.store.LastRuns(context.Background(), job, 0)
	if err != nil {
		t.Errorf("%s: %v", f.name, err)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	total := 0
	for _, n := range f.runs {
		total += n
	}
	if len(runs) != total {
		t.Errorf("%s: store has %d records, want %d", f.name, len(runs), total)
	}
	for _, r := range runs {
		if !r.Succeeded() || r.Instance == "" || r.Token == 0 {
			t.Errorf("%s: record %+v: want a successful run with instance and token", f.name, r)
		}
	}
}

var jobSeq atomic.Int64

func jobName(t *testing.T) string {
	return fmt.Sprintf("%s-%d-%d", t.Name(), time.Now().UnixNano(), jobSeq.Add(1))
}

// fleetTriggers is the number of triggers of a fleet scenario: 8 seconds
// in the short form, 40 with LOCKX_FAULTS=long.
func fleetTriggers() int {
	if os.Getenv("LOCKX_FAULTS") == "long" {
		return 40
	}
	return 8
}

// fleetSuite runs the fleet scenarios over clients made by newClient (one
// per instance, all reaching the same store) on a 1 s schedule, with
// instance clocks up to 0.45 of the period ahead and behind; mode
// "backend5s" names triggers by the store's clock (UsingBackendTime) with
// instance clocks up to 5 s off. The guard runs with its defaults
// (AtLeastFor two periods), but for AllowOverlap: a run stalled past the
// period on a loaded machine would make the next trigger an Overlap skip,
// which SlowJob tests. The scenarios mostly sleep, so they run at once, in
// goroutines rather than parallel subtests: go test runs only GOMAXPROCS
// parallel tests at a time.
func fleetSuite(t *testing.T, newClient func(t *testing.T) *lockx.Client, slow bool, modes ...string) {
	const period = time.Second
	triggers := fleetTriggers()
	clients := func() []*lockx.Client {
		cs := make([]*lockx.Client, 5)
		for i := range cs {
			cs[i] = newClient(t)
		}
		return cs
	}
	var scenarios []func()
	for _, mode := range modes {
		scenarios = append(scenarios, func() {
			f := newFleet("FastJob/"+mode, period, triggers, mode)
			f.jobTime = time.Millisecond
			f.opts = []cronguard.Option{cronguard.AllowOverlap()}
			if mode == "atleastonce" {
				// The default renewed lease is 1 s. Over PostgreSQL, five
				// fresh pools claiming the first trigger at once on a loaded
				// machine have seen it lapse before its first renewal (the
				// claim lost, the trigger re-run as AtLeastOnce must).
				f.opts = append(f.opts, cronguard.RenewedLease(2*period))
			}
			if mode == "backend5s" {
				// Whole periods and fractions of up to 0.2 either way: the
				// store's clock names, for each firing, the trigger nearest to it.
				f.skews = []float64{-5, -2.2, 0, 3.15, 5}
			}
			name := jobName(t)
			first := f.run(t, name, clients())
			f.checkOnce(t, first)
			f.checkStore(t, name)
		})
	}
	if slow {
		scenarios = append(scenarios, slowScenarios(t, period, triggers, clients)...)
	}
	var wg sync.WaitGroup
	for _, s := range scenarios {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s()
		}()
	}
	wg.Wait()
}

// slowScenarios: a job longer than the period, skipped or overlapping.
func slowScenarios(t *testing.T, period time.Duration, triggers int, clients func() []*lockx.Client) []func() {
	return []func(){func() {
		f := newFleet("SlowJob/SkipOverlap", period, triggers/2, "scheduled")
		f.jobTime = period * 3 / 2
		f.opts = []cronguard.Option{cronguard.AtLeastFor(8 * period), cronguard.AtMostFor(8 * period)}
		first := f.run(t, jobName(t), clients())
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.maxActive != 1 {
			t.Errorf("%s: %d runs at once, want 1", f.name, f.maxActive)
		}
		ran := 0
		for k := range f.triggers {
			trig := first.Add(time.Duration(k) * period).UnixNano()
			overlap := 0
			for _, r := range f.skips[trig] {
				if r == cronguard.Overlap {
					overlap++
				}
			}
			ran += f.runs[trig]
			// Each trigger is either run once or skipped as an overlap once.
			if f.runs[trig]+overlap != 1 {
				t.Errorf("%s: trigger %d: ran %d, skipped as overlap %d times", f.name, k, f.runs[trig], overlap)
			}
		}
		if ran < f.triggers/3 {
			t.Errorf("%s: only %d of %d triggers ran", f.name, ran, f.triggers)
		}
		f.checkNoStray(t, first)
	}, func() {
		f := newFleet("SlowJob/AllowOverlap", period, triggers/2, "scheduled")
		f.jobTime = period * 3 / 2
		f.opts = []cronguard.Option{cronguard.AtLeastFor(8 * period), cronguard.AtMostFor(8 * period), cronguard.AllowOverlap()}
		first := f.run(t, jobName(t), clients())
		f.checkOnce(t, first)
		if f.maxActive < 2 {
			t.Errorf("%s: max %d runs at once, want overlapping runs", f.name, f.maxActive)
		}
	}}
}
