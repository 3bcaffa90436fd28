package robfigcron_test

import (
	"context"
	"fmt"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/patterns/cronguard"
	"github.com/lockx-go/lockx/patterns/cronguard/robfigcron"
)

func ExampleAddFunc() {
	locks := lockx.New(memlock.New()) // redislock.New(rdb) in production
	defer locks.Close()

	c := cron.New(cron.WithLocation(time.UTC))
	id, err := robfigcron.AddFunc(c, locks, "hourly-sync", "@hourly", func(ctx context.Context) error {
		trig, _ := cronguard.TriggerFromContext(ctx)
		fmt.Println("syncing the hour starting at minute", trig.Minute())
		return nil
	}, cronguard.AtMostFor(30*time.Minute))
	if err != nil {
		fmt.Println(err)
		return
	}
	// c.Start() would call this at the top of every hour on every instance;
	// call it once by hand. A second call for the same hour is skipped.
	job := c.Entry(id).Job
	job.Run()
	job.Run()
	fmt.Println("runs recorded:", len(mustRuns(job)))
	// Output:
	// syncing the hour starting at minute 0
	// runs recorded: 1
}

func mustRuns(j cron.Job) []cronguard.Run {
	runs, _ := j.(*cronguard.Job).LastRuns(context.Background(), 0)
	return runs
}
