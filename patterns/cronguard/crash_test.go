package cronguard_test

import (
	"context"
	"crypto/rand"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/pglock"
	"github.com/lockx-go/lockx/lockx/redislock"
	"github.com/lockx-go/lockx/patterns/cronguard"
)

// The crash tests kill a real process in the middle of a run: instance 0
// is a copy of the test binary (testenv.StartChild) that claims the trigger
// and is SIGKILLed inside the job; the test's own instances fire for the
// same trigger over their own connections. Outcomes are kept in a
// BackendStore in the lock store itself, shared by every process.

const (
	crashPeriod    = 250 * time.Millisecond
	crashAtMost    = 2 * time.Second // AtMostOnce: the claim's lease
	crashRenewed   = time.Second     // AtLeastOnce: the lease the watchdog renews
	crashAtMostALO = 10 * time.Second
)

// crashBackend opens a backend of kind ("redis" or "postgres") at conn under
// namespace ns (a key prefix or a schema), as each process of a crash test
// does, with a function that closes it.
func crashBackend(kind, conn, ns string) (driver.Backend, func(), error) {
	switch kind {
	case "redis":
		rdb := redis.NewClient(&redis.Options{Addr: conn})
		return redislock.New(rdb, redislock.WithPrefix(ns)), func() { _ = rdb.Close() }, nil
	case "postgres":
		cfg, err := pgxpool.ParseConfig(conn)
		if err != nil {
			return nil, nil, err
		}
		cfg.MaxConns = 4
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			return nil, nil, err
		}
		b := pglock.New(pool, pglock.WithSchema(ns), pglock.WithSessions(1))
		return b, func() { _ = b.Close(); pool.Close() }, nil
	}
	return nil, nil, errors.New("unknown backend " + kind)
}

// crashJob is the job as every process guards it.
func crashJob(b driver.Backend, name, instance string, delivery cronguard.Delivery, fn func(context.Context) error) (*cronguard.Job, *lockx.Client, error) {
	var rs driver.ResultStore
	driver.As(b, &rs)
	store, err := cronguard.NewBackendStore(rs, time.Minute)
	if err != nil {
		return nil, nil, err
	}
	opts := []cronguard.Option{cronguard.Every(crashPeriod), cronguard.WithStore(store),
		cronguard.WithInstance(instance), cronguard.AtMostFor(crashAtMost)}
	if delivery == cronguard.AtLeastOnce {
		opts = append(opts, cronguard.WithDelivery(cronguard.AtLeastOnce),
			cronguard.AtMostFor(crashAtMostALO), cronguard.RenewedLease(crashRenewed))
	}
	locks := lockx.New(b)
	job, err := cronguard.Guard(locks, name, fn, opts...)
	if err != nil {
		_ = locks.Close()
	}
	return job, locks, err
}

// The doomed runner: claims the trigger and stays in the job until killed.
var _ = testenv.Role("cronguard-runner", func(args []string) error {
	kind, conn, ns, name := args[0], args[1], args[2], args[3]
	trigNs, err := strconv.ParseInt(args[4], 10, 64)
	if err != nil {
		return err
	}
	delivery, err := strconv.Atoi(args[5])
	if err != nil {
		return err
	}
	b, closeBackend, err := crashBackend(kind, conn, ns)
	if err != nil {
		return err
	}
	defer closeBackend()
	job, locks, err := crashJob(b, name, "doomed", cronguard.Delivery(delivery), func(ctx context.Context) error {
		testenv.Say("running")
		select {} // a job stuck until the process dies
	})
	if err != nil {
		return err
	}
	defer locks.Close()
	return errors.Join(errors.New("the doomed run ended"), job.RunAt(context.Background(), time.Unix(0, trigNs)))
})

// crashFleet starts the doomed runner for one trigger and makes the test's
// own instances of the job, which count their runs.
type crashFleet struct {
	name     string
	trig     time.Time
	doomed   *testenv.Child
	jobs     []*cronguard.Job
	runs     atomic.Int32
	late     int32 // runs by calls answered after the claim could have lapsed
	delivery cronguard.Delivery
	started  time.Time // before the runner started: no later than its claim
}

func startCrashFleet(t *testing.T, kind, conn, ns string, delivery cronguard.Delivery) *crashFleet {
	f := &crashFleet{name: jobName(t), trig: time.Now().Truncate(crashPeriod), delivery: delivery, started: time.Now()}
	f.doomed = testenv.StartChild(t, "cronguard-runner", kind, conn, ns, f.name,
		strconv.FormatInt(f.trig.UnixNano(), 10), strconv.Itoa(int(delivery)))
	f.doomed.Expect(t, "running", 30*time.Second)
	for i := range 4 {
		b, closeBackend, err := crashBackend(kind, conn, ns)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(closeBackend)
		job, locks, err := crashJob(b, f.name, "instance-"+strconv.Itoa(i+1), delivery, func(context.Context) error {
			f.runs.Add(1)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = locks.Close() })
		f.jobs = append(f.jobs, job)
	}
	return f
}

// skipsAll checks that every instance skips the trigger as taken or done,
// for the answers that came before until (when the claim may lapse, and a
// lapsed claim may be run again).
func (f *crashFleet) skipsAll(t *testing.T, when string, until time.Time) {
	t.Helper()
	for _, j := range f.jobs {
		err := j.RunAt(context.Background(), f.trig)
		if time.Now().After(until) {
			if err == nil {
				f.late++
			}
			return
		}
		var se *cronguard.SkipError
		if !errors.As(err, &se) || (se.Reason != cronguard.Taken && se.Reason != cronguard.Done) {
			t.Fatalf("%s: got %v, want a Taken or Done skip", when, err)
		}
	}
}

// crashAtMostOnce: the runner is SIGKILLed mid-run; no other instance runs
// the trigger while it lived nor afterwards until AtMostFor.
func crashAtMostOnce(t *testing.T, kind, conn, ns string) {
	f := startCrashFleet(t, kind, conn, ns, cronguard.AtMostOnce)
	// The claim is no earlier than f.started; on a loaded machine starting
	// the fleet can take much of AtMostFor, so every check is bounded by it.
	until := f.started.Add(crashAtMost - 200*time.Millisecond)
	for end := time.Now().Add(500 * time.Millisecond); time.Now().Before(end) && time.Now().Before(until); time.Sleep(50 * time.Millisecond) {
		f.skipsAll(t, "while the runner lives", until)
	}
	f.doomed.Kill(t)
	for time.Now().Before(until) {
		f.skipsAll(t, "after the runner was killed", until)
		time.Sleep(50 * time.Millisecond)
	}
	if n := f.runs.Load() - f.late; n != 0 {
		t.Fatalf("the trigger ran %d more times after the runner was killed, want none", n)
	}
}

// crashAtLeastOnce: the instances wait on the runner's claim; it is renewed
// while the runner lives (none of them runs), and after the SIGKILL exactly
// one re-runs the trigger within a renewed lease and the others find it done.
func crashAtLeastOnce(t *testing.T, kind, conn, ns string) {
	f := startCrashFleet(t, kind, conn, ns, cronguard.AtLeastOnce)
	results := make(chan error, len(f.jobs))
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, j := range f.jobs {
		wg.Go(func() { results <- j.RunAt(context.Background(), f.trig) })
	}
	time.Sleep(2 * crashRenewed)
	if n := f.runs.Load(); n != 0 {
		t.Fatalf("the trigger ran %d more times while the runner lived, want none", n)
	}
	f.doomed.Kill(t)
	killed := time.Now()
	var ran, done int
	for range f.jobs {
		err := <-results
		var se *cronguard.SkipError
		switch {
		case err == nil:
			ran++
			if d := time.Since(killed); d > crashRenewed+time.Second {
				t.Errorf("re-run %v after the kill, want within the renewed lease %v", d, crashRenewed)
			}
		case errors.As(err, &se) && se.Reason == cronguard.Done:
			done++
		default:
			t.Errorf("waiting instance: %v", err)
		}
	}
	if ran != 1 || done != len(f.jobs)-1 || f.runs.Load() != 1 {
		t.Errorf("after the kill: %d re-runs (%d runs counted) and %d done skips, want 1 and %d", ran, f.runs.Load(), done, len(f.jobs)-1)
	}
}

func TestCrashAtMostOnceRedis(t *testing.T) {
	t.Parallel()
	crashAtMostOnce(t, "redis", testenv.RedisAddr(t), "cronguardtest:crash:"+rand.Text()+":")
}

func TestCrashAtLeastOnceRedis(t *testing.T) {
	t.Parallel()
	crashAtLeastOnce(t, "redis", testenv.RedisAddr(t), "cronguardtest:crash:"+rand.Text()+":")
}
