package cronguard_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/patterns/cronguard"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func memClients(b *memlock.Backend) func(t *testing.T) *lockx.Client {
	return func(t *testing.T) *lockx.Client {
		c := lockx.New(b)
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
}

func TestFleetMemlock(t *testing.T) {
	t.Parallel()
	fleetSuite(t, memClients(memlock.New()), true, "scheduled", "now", "backend", "backend5s", "atleastonce")
}

// killable stands for a runner's process: once killed, nothing it sends
// reaches the store any more.
type killable struct {
	driver.Backend
	dead atomic.Bool
}

var errKilled = errors.New("process killed")

func (k *killable) Acquire(ctx context.Context, req driver.Request) (driver.Result, error) {
	if k.dead.Load() {
		return driver.Result{}, driver.Unavailable("acquire", errKilled)
	}
	return k.Backend.Acquire(ctx, req)
}

func (k *killable) Extend(ctx context.Context, key string, owner lockx.Owner, lease time.Duration) error {
	if k.dead.Load() {
		return driver.Unavailable("extend", errKilled)
	}
	return k.Backend.Extend(ctx, key, owner, lease)
}

func (k *killable) Release(ctx context.Context, key string, owner lockx.Owner) error {
	if k.dead.Load() {
		return driver.Unavailable("release", errKilled)
	}
	return k.Backend.Release(ctx, key, owner)
}

// killScenario has instance 0 claim a trigger and die mid-run; the other
// instances keep asking for the same trigger.
type killScenario struct {
	atMost  time.Duration
	opts    []cronguard.Option
	started chan struct{} // closed when the doomed run starts
	unblock chan struct{} // lets the doomed run return (its process is dead)
	runs    atomic.Int32
}

func (s *killScenario) guard(t *testing.T, locks *lockx.Client, name string, i int, doomed bool) *cronguard.Job {
	t.Helper()
	fn := func(ctx context.Context) error {
		s.runs.Add(1)
		if doomed {
			close(s.started)
			<-s.unblock // a dead process never returns; ignore ctx on purpose
			return errKilled
		}
		return nil
	}
	job, err := cronguard.Guard(locks, name, fn, append([]cronguard.Option{
		cronguard.Every(250 * time.Millisecond), cronguard.AtMostFor(s.atMost),
		cronguard.WithInstance(string(rune('A' + i)))}, s.opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return job
}

func TestRunnerKilledAtMostOnce(t *testing.T) {
	t.Parallel()
	b := memlock.New()
	killedAtMostOnce(t, func() driver.Backend { return b })
}

func TestRunnerKilledAtLeastOnce(t *testing.T) {
	t.Parallel()
	b := memlock.New()
	killedAtLeastOnce(t, func() driver.Backend { return b }, cronguard.NewMemStore(0))
}

// killedAtMostOnce: a runner killed mid-job leaves its trigger claimed; no
// instance runs it again before AtMostFor. newBackend returns backends of
// one store, one per instance.
func killedAtMostOnce(t *testing.T, newBackend func() driver.Backend, opts ...cronguard.Option) {
	s := &killScenario{atMost: time.Second, started: make(chan struct{}), unblock: make(chan struct{}), opts: opts}
	name := jobName(t)
	k := &killable{Backend: newBackend()}
	doomedClient := lockx.New(k)
	doomed := s.guard(t, doomedClient, name, 0, true)
	trig := time.Now().Truncate(250 * time.Millisecond)
	var wg sync.WaitGroup
	wg.Add(1)
	doomedErr := make(chan error, 1)
	go func() {
		defer wg.Done()
		doomedErr <- doomed.RunAt(context.Background(), trig)
	}()
	select {
	case <-s.started:
	case err := <-doomedErr:
		t.Fatalf("the doomed instance did not run: %v", err)
	}
	claimed := time.Now()
	k.dead.Store(true)
	_ = doomedClient.Close() // closes its backend too: a PostgreSQL session ends, and its locks with it
	close(s.unblock)         // the doomed run's Finish cannot reach the store either
	wg.Wait()

	others := make([]*cronguard.Job, 4)
	for i := range others {
		others[i] = s.guard(t, clientOf(t, newBackend()), name, i+1, false)
	}
	// Until AtMostFor has passed, every instance finds the trigger taken.
wait:
	for time.Since(claimed) < s.atMost-100*time.Millisecond {
		for _, j := range others {
			err := j.RunAt(context.Background(), trig)
			if time.Since(claimed) >= s.atMost {
				break wait // answered after AtMostFor, when a lapsed claim may be found done or run
			}
			var se *cronguard.SkipError
			if !errors.As(err, &se) || se.Reason != cronguard.Taken {
				t.Fatalf("%v after the kill: got %v, want a Taken skip", time.Since(claimed), err)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := s.runs.Load(); n != 1 {
		t.Fatalf("trigger ran %d times before AtMostFor, want 1", n)
	}
	if len(opts) > 0 {
		return // with a durable store the test's doomed run wrote its record: a straggler finds it done
	}
	// After AtMostFor the claim has lapsed: a straggler may run it again.
	time.Sleep(time.Until(claimed.Add(s.atMost + 50*time.Millisecond)))
	if err := others[0].RunAt(context.Background(), trig); err != nil {
		t.Fatalf("after AtMostFor: %v, want a run", err)
	}
}

// killedAtLeastOnce: under AtLeastOnce, a runner killed mid-job is replaced
// by one waiting instance; the others find the trigger done in store.
func killedAtLeastOnce(t *testing.T, newBackend func() driver.Backend, store cronguard.Store) {
	s := &killScenario{atMost: 5 * time.Second, started: make(chan struct{}), unblock: make(chan struct{}),
		opts: []cronguard.Option{cronguard.WithDelivery(cronguard.AtLeastOnce), cronguard.WithStore(store)}}
	name := jobName(t)
	k := &killable{Backend: newBackend()}
	doomedClient := lockx.New(k)
	defer doomedClient.Close()
	doomed := s.guard(t, doomedClient, name, 0, true)
	trig := time.Now().Truncate(250 * time.Millisecond)

	var wg sync.WaitGroup
	wg.Add(1)
	doomedErr := make(chan error, 1)
	go func() {
		defer wg.Done()
		doomedErr <- doomed.RunAt(context.Background(), trig)
	}()
	select {
	case <-s.started:
	case err := <-doomedErr:
		t.Fatalf("the doomed instance did not run: %v", err)
	}
	// The other instances fire for the same trigger and wait on its claim.
	results := make(chan error, 4)
	for i := range 4 {
		j := s.guard(t, clientOf(t, newBackend()), name, i+1, false)
		wg.Add(1)
		go func() {
			defer wg.Done()
			results <- j.RunAt(context.Background(), trig)
		}()
	}
	time.Sleep(100 * time.Millisecond)
	killed := time.Now()
	k.dead.Store(true) // renewals stop reaching the store: the claim lapses
	var ran, done int
	for range 4 {
		err := <-results
		var se *cronguard.SkipError
		switch {
		case err == nil:
			ran++
			if d := time.Since(killed); d > s.atMost/2 {
				t.Errorf("re-run %v after the kill, want within a short lease", d)
			}
		case errors.As(err, &se) && se.Reason == cronguard.Done:
			done++
		default:
			t.Errorf("waiting instance: %v", err)
		}
	}
	close(s.unblock)
	wg.Wait()
	if ran != 1 || done != 3 {
		t.Errorf("after the kill: %d re-runs and %d done skips, want 1 and 3", ran, done)
	}
	if n := s.runs.Load(); n != 2 {
		t.Errorf("trigger started %d times, want 2 (the killed run and its re-run)", n)
	}
	if r, ok, err := store.Find(context.Background(), name, trig); err != nil || !ok || !r.Succeeded() || r.Instance == "A" {
		t.Errorf("Find = %+v, %v, %v; want the re-run's successful record", r, ok, err)
	}
	if _, isMem := store.(*cronguard.MemStore); isMem {
		runs, _ := store.LastRuns(context.Background(), name, 0)
		if len(runs) != 2 || !runs[0].Lost || runs[0].Instance != "A" || !runs[1].Succeeded() {
			t.Errorf("records %+v: want the killed run marked lost (recorded last) and the re-run", runs)
		}
	}
}

func clientOf(t *testing.T, b driver.Backend) *lockx.Client {
	c := lockx.New(b)
	t.Cleanup(func() { _ = c.Close() })
	return c
}
