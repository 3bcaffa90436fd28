package cronguard_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/patterns/cronguard"
)

// Two instances fire for the same nightly trigger, one of them three
// seconds late by its clock: one runs it, the other skips and says so.
func Example() {
	store := memlock.New() // stands for the Redis or PostgreSQL every instance reaches
	nightly := time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)

	for i, firedAt := range []time.Time{nightly, nightly.Add(3 * time.Second)} {
		locks := lockx.New(store)
		defer locks.Close()
		job, err := cronguard.Guard(locks, "nightly-report",
			func(ctx context.Context) error {
				trig, _ := cronguard.TriggerFromContext(ctx)
				fmt.Println("report for", trig.Format(time.DateOnly))
				return nil
			},
			cronguard.Every(24*time.Hour),
			cronguard.WithInstance(fmt.Sprint("instance-", i)),
			cronguard.OnSkip(func(e *cronguard.SkipError) { fmt.Println(e.Instance, "skipped:", e.Reason) }),
		)
		if err != nil {
			fmt.Println(err)
			return
		}
		_ = job.RunAt(context.Background(), firedAt)
	}
	// Output:
	// report for 2026-11-30
	// instance-1 skipped: taken
}

// A scheduler that only calls func() — time.Ticker, robfig/cron — gets Run;
// the trigger is the scheduled instant nearest to the clock.
func ExampleJob_Run() {
	locks := lockx.New(memlock.New())
	defer locks.Close()
	job, err := cronguard.Guard(locks, "cleanup", func(ctx context.Context) error {
		fmt.Println("cleaning up")
		return nil
	}, cronguard.Every(time.Minute))
	if err != nil {
		fmt.Println(err)
		return
	}
	job.Run()
	// Output: cleaning up
}

func ExampleJob_LastRuns() {
	locks := lockx.New(memlock.New())
	defer locks.Close()
	job, _ := cronguard.Guard(locks, "invoices", func(ctx context.Context) error {
		return errors.New("smtp down")
	}, cronguard.Every(time.Hour), cronguard.WithInstance("web-1"))

	_ = job.RunAt(context.Background(), time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC))
	runs, _ := job.LastRuns(context.Background(), 10)
	for _, r := range runs {
		fmt.Println(r.Trigger.Format(time.RFC3339), r.Instance, r.Succeeded(), r.Error)
	}
	// Output: 2026-11-30T03:00:00Z web-1 false smtp down
}

// A scheduler that runs the job itself and only asks for permission uses a
// Claimer (this is how the gocron adapter works).
func ExampleClaimer() {
	locks := lockx.New(memlock.New())
	defer locks.Close()
	claims, err := cronguard.NewClaimer(locks, "sync", cronguard.Every(5*time.Minute))
	if err != nil {
		fmt.Println(err)
		return
	}
	scheduled := time.Date(2026, 11, 30, 3, 5, 0, 0, time.UTC)
	claim, err := claims.Claim(context.Background(), scheduled)
	if errors.Is(err, cronguard.ErrSkipped) {
		return // another instance has it
	}
	fmt.Println("running", claim.Trigger().Format(time.Kitchen))
	_ = claim.Finish(nil) // keeps the trigger claimed for AtLeastFor

	_, err = claims.Claim(context.Background(), scheduled.Add(2*time.Second))
	fmt.Println(errors.Is(err, cronguard.ErrSkipped))
	// Output:
	// running 3:05AM
	// true
}

func ExampleGuard_badInput() {
	locks := lockx.New(memlock.New())
	defer locks.Close()
	_, err := cronguard.Guard(locks, "report", func(context.Context) error { return nil },
		cronguard.Every(time.Hour), cronguard.AtLeastFor(2*time.Hour), cronguard.AtMostFor(time.Hour))
	var arg *lockx.ArgError
	fmt.Println(errors.As(err, &arg), arg.Arg)
	// Output: true AtLeastFor
}

// Records kept in the backend are seen by every instance: here a second
// client reads what the first one ran.
func ExampleNewBackendStore() {
	b := memlock.New() // redislock and pglock are ResultStores too
	var rs driver.ResultStore
	driver.As(b, &rs)
	store, err := cronguard.NewBackendStore(rs, 7*24*time.Hour)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, name := range []string{"web-1", "web-2"} {
		locks := lockx.New(b)
		defer locks.Close()
		job, _ := cronguard.Guard(locks, "rollup", func(context.Context) error { return nil },
			cronguard.Every(time.Hour), cronguard.WithStore(store), cronguard.WithInstance(name))
		_ = job.RunNow(context.Background()) // both fire now: one trigger
		runs, _ := job.LastRuns(context.Background(), 1)
		fmt.Println(name, "sees the run by", runs[0].Instance)
	}
	// Output:
	// web-1 sees the run by web-1
	// web-2 sees the run by web-1
}
