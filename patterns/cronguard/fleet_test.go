package cronguard_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
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
	skews    []float64 // fraction of the period each instance's clock is ahead
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
}

func newFleet(name string, period time.Duration, triggers int, mode string) *fleet {
	return &fleet{name: name,
		period: period, triggers: triggers, mode: mode,
		skews: []float64{-0.4, -0.2, 0, 0.2, 0.4},
		runs:  make(map[int64]int), skips: make(map[int64][]cronguard.SkipReason),
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
	// Start on the grid, one period ahead, so every instance sees every trigger.
	first := time.Now().Truncate(f.period).Add(2 * f.period)
	var wg sync.WaitGroup
	for i, locks := range clients {
		skew := time.Duration(f.skews[i%len(f.skews)] * float64(f.period))
		clock := func() time.Time { return time.Now().Add(skew) }
		opts := append([]cronguard.Option{cronguard.Every(f.period), cronguard.WithClock(clock),
			cronguard.WithInstance(fmt.Sprintf("i%d(%+v)", i, skew)), cronguard.WithStore(f.store),
			cronguard.OnSkip(f.onSkip)}, f.opts...)
		switch f.mode {
		case "backend":
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

// checkOnce asserts that every trigger ran exactly once and nothing else ran.
//
// When the instances name the trigger by a clock read as they fire (modes
// "now" and "backend"), a timer late by half a period — a test process
// paused for 125 ms on a loaded machine — names the next trigger instead.
// That can never run a trigger twice (the key is the trigger), but if every
// instance is paused at once a trigger runs nowhere. For those modes a few
// missed triggers are logged, not failed; at most once is still strict.
func (f *fleet) checkOnce(t *testing.T, first time.Time) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	lenient := f.mode == "now" || f.mode == "backend"
	var missed []int
	for k := range f.triggers {
		trig := first.Add(time.Duration(k) * f.period).UnixNano()
		n := f.runs[trig]
		if n == 0 && lenient {
			missed = append(missed, k)
			continue
		}
		if n != 1 {
			t.Errorf("%s: trigger %d (%v): ran %d times, skips %v", f.name, k, time.Unix(0, trig).Format("15:04:05.000"), n, f.skips[trig])
		}
	}
	if len(missed) > 0 {
		t.Logf("%s: triggers %v ran nowhere: every instance fired more than half a period late", f.name, missed)
		if len(missed) > f.triggers/10 {
			t.Errorf("%s: %d of %d triggers ran nowhere", f.name, len(missed), f.triggers)
		}
	}
	if !lenient {
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

// fleetSuite runs the fleet scenarios over clients made by newClient (one
// per instance, all reaching the same store). The scenarios mostly sleep, so
// they run at once, in goroutines rather than parallel subtests: go test
// runs only GOMAXPROCS parallel tests at a time.
func fleetSuite(t *testing.T, newClient func(t *testing.T) *lockx.Client, triggers int, slow bool, modes ...string) {
	const period = 250 * time.Millisecond
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
			// A run stalled past the period on a loaded machine would make the
			// next trigger an Overlap skip: that is tested by SlowJob.
			// Claims kept for 8 periods (2 s) tolerate a test process paused
			// for well over a second on a loaded machine; the key names the
			// trigger, so that costs nothing.
			f.opts = []cronguard.Option{cronguard.AllowOverlap(),
				cronguard.AtLeastFor(8 * period), cronguard.AtMostFor(8 * period)}
			if mode == "atleastonce" {
				f.opts = append(f.opts, cronguard.RenewedLease(8*period))
			}
			if mode == "backend" {
				// Naming the trigger by the store's clock tolerates a firing
				// offset (clock skew + timer delay) below half a period: with
				// ±40 % skew that leaves 25 ms for delays, too little on a
				// shared CI machine; ±20 % leaves 75 ms.
				f.skews = []float64{-0.2, -0.1, 0, 0.1, 0.2}
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
