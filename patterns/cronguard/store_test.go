package cronguard_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/internal/wallclock"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/lockx/redislock"
	"github.com/lockx-go/lockx/patterns/cronguard"
)

// testStore checks a Store through a Claimer's view of it: records of three
// triggers, one of them a lost run followed by its re-run.
func testStore(t *testing.T, locks *lockx.Client, store cronguard.Store) {
	t.Helper()
	ctx := context.Background()
	job := jobName(t)
	c, err := cronguard.NewClaimer(locks, job, cronguard.Every(time.Second), cronguard.WithStore(store))
	if err != nil {
		t.Fatal(err)
	}
	now := wallclock.Now().Truncate(time.Second) // the clock LastRuns reads
	t1, t2, t3 := now.Add(-2*time.Second), now.Add(-time.Second), now
	recs := []cronguard.Run{
		{Job: job, Trigger: t1, Instance: "a", Token: 1},
		{Job: job, Trigger: t2, Instance: "b", Token: 2, Lost: true, Error: "lockx: lock lost"},
		{Job: job, Trigger: t2, Instance: "c", Token: 3},
		{Job: job, Trigger: t3, Instance: "a", Token: 4, Error: "boom"},
	}
	for _, r := range recs {
		if err := store.Record(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if r, ok, err := store.Find(ctx, job, t2); err != nil || !ok || r.Instance != "c" {
		t.Errorf("Find(t2) = %+v, %v, %v; want c's run, not the lost one", r, ok, err)
	}
	if _, ok, err := store.Find(ctx, job, now.Add(time.Hour)); err != nil || ok {
		t.Errorf("Find(no run) = %v, %v", ok, err)
	}
	runs, err := c.LastRuns(ctx, 2)
	if err != nil || len(runs) != 2 || !runs[0].Trigger.Equal(t3) || runs[0].Error != "boom" || !runs[1].Trigger.Equal(t2) {
		t.Errorf("LastRuns(2) = %+v, %v; want t3's then t2's", runs, err)
	}
}

func TestMemStore(t *testing.T) {
	t.Parallel()
	testStore(t, newLocks(t), cronguard.NewMemStore(0))
}

func TestBackendStoreMemlock(t *testing.T) {
	t.Parallel()
	b := memlock.New()
	locks := lockx.New(b)
	defer locks.Close()
	store, err := cronguard.NewBackendStore(b, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	testStore(t, locks, store)
	if _, err := cronguard.NewBackendStore(nil, time.Hour); !errors.Is(err, lockx.ErrInvalidArgument) {
		t.Errorf("nil store: %v", err)
	}
	if _, err := cronguard.NewBackendStore(b, 0); !errors.Is(err, lockx.ErrInvalidArgument) {
		t.Errorf("zero retention: %v", err)
	}
}

func TestBackendStoreRedis(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t)})
	defer rdb.Close()
	b := redislock.New(rdb, redislock.WithPrefix("cronguardtest:"+jobName(t)+":"))
	locks := lockx.New(b)
	defer locks.Close()
	store, err := cronguard.NewBackendStore(b, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	testStore(t, locks, store)
}

// amnesiac is a lock backend that has lost every lock: each attempt is
// granted, as after a Redis failover or when the holder's PostgreSQL session
// died.
type amnesiac struct {
	driver.Backend
	token atomic.Uint64
}

func (a *amnesiac) Acquire(ctx context.Context, req driver.Request) (driver.Result, error) {
	return driver.Result{Acquired: true, Token: lockx.Token(a.token.Add(1)), TTL: req.Lease}, nil
}

// With a BackendStore, an AtMostOnce claim survives the loss of its lock:
// the start mark refuses a late instance while the run may still go on, and
// the done record after it.
func TestDurableClaimSurvivesLostLock(t *testing.T) {
	t.Parallel()
	b := memlock.New()
	store, err := cronguard.NewBackendStore(b, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	trig := time.Now().Truncate(time.Second)
	release := make(chan struct{})
	var runs atomic.Int32
	guard := func(name string, block bool) *cronguard.Job {
		locks := lockx.New(&amnesiac{Backend: b})
		t.Cleanup(func() { _ = locks.Close() })
		j, err := cronguard.Guard(locks, "durable", func(context.Context) error {
			runs.Add(1)
			if block {
				<-release
			}
			return nil
		}, cronguard.Every(time.Second), cronguard.AtMostFor(300*time.Millisecond),
			cronguard.WithStore(store), cronguard.WithInstance(name))
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	a, late := guard("a", true), guard("late", false)
	done := make(chan error)
	go func() { done <- a.RunAt(context.Background(), trig) }()
	for runs.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	var se *cronguard.SkipError
	if err := late.RunAt(context.Background(), trig); !errors.As(err, &se) || se.Reason != cronguard.Taken {
		t.Errorf("while a runs: %v, want a Taken skip", err)
	}
	close(release)
	if err := <-done; err != nil && !errors.Is(err, lockx.ErrLost) { // the lock was lost, and is reported so
		t.Fatal(err)
	}
	time.Sleep(350 * time.Millisecond) // the start mark (AtMostFor) is gone; the record is not
	if err := late.RunAt(context.Background(), trig); !errors.As(err, &se) || se.Reason != cronguard.Done {
		t.Errorf("after a's run: %v, want a Done skip", err)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("ran %d times, want 1", n)
	}
}

// forgetful loses every lock right after granting it, as a Redis failover
// to a replica that missed the write would.
type forgetful struct{ driver.Backend }

func (forgetful) TTL(context.Context, string, lockx.Owner) (time.Duration, error) {
	return 0, lockx.ErrNotHeld
}

func TestLostClaimCancelsRun(t *testing.T) {
	t.Parallel()
	locks := lockx.New(forgetful{memlock.New()})
	defer locks.Close()
	var cause error
	job, err := cronguard.Guard(locks, "lost", func(ctx context.Context) error {
		<-ctx.Done()
		cause = context.Cause(ctx)
		return ctx.Err()
	}, cronguard.Every(time.Second), cronguard.AtMostFor(400*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_ = job.RunAt(context.Background(), start)
	if d := time.Since(start); !errors.Is(cause, lockx.ErrLost) || d > 300*time.Millisecond {
		t.Errorf("cause %v after %v; want ErrLost after about 100 ms (a quarter of AtMostFor)", cause, d)
	}
	runs, _ := job.LastRuns(context.Background(), 1)
	if len(runs) != 1 || !runs[0].Lost {
		t.Errorf("records %+v: want the run marked lost", runs)
	}
}
