package gocronleader_test

import (
	"context"
	"fmt"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/patterns/leader"
	"github.com/lockx-go/lockx/patterns/leader/gocronleader"
)

// A scheduler that runs its jobs only while its instance leads.
func Example() {
	locks := lockx.New(memlock.New()) // stands for the backend every instance reaches
	defer locks.Close()
	e, _ := leader.New(locks, "billing-jobs", leader.WithIdentity("node-a"))
	el := gocronleader.New(e)

	ctx, stop := context.WithCancel(context.Background())
	campaign := make(chan error, 1)
	go func() { campaign <- el.Run(ctx) }()
	defer func() { stop(); <-campaign }()

	s, _ := gocron.NewScheduler(gocron.WithDistributedElector(el))
	ran := make(chan string, 1)
	_, _ = s.NewJob(gocron.OneTimeJob(gocron.OneTimeJobStartImmediately()), gocron.NewTask(func() {
		t, ok := el.Term() // fence the job's writes with t.Token()
		if ok {
			ran <- t.Identity()
		}
	}))
	for el.IsLeader(ctx) != nil { // wait for the first term before starting
		time.Sleep(time.Millisecond)
	}
	s.Start()
	defer s.Shutdown()
	fmt.Println("job ran on", <-ran)
	// Output: job ran on node-a
}
