package leader_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/redislock"
	"github.com/lockx-go/lockx/patterns/leader"
)

// The tests below run a candidate in a child process — this test binary,
// re-executed with childEnv set — so that it can be killed (SIGKILL) or
// paused (SIGSTOP) like a real leader. The child talks on stdout, one event
// a line: "LEAD <term>", "WRITE <term> ok|stale" (a fenced write), "LOST
// <cause>", then "LATE <term> ok|stale" (a write that raced the loss).
const childEnv = "LEADER_TEST_CHILD"

// childMain is the child's whole life: campaign, report, and (with a
// resource) write fenced by the term every 10 ms until the term ends.
func childMain() {
	lease, _ := time.ParseDuration(os.Getenv("LEADER_TEST_LEASE"))
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("LEADER_TEST_REDIS")})
	b := redislock.New(rdb, redislock.WithPrefix(os.Getenv("LEADER_TEST_PREFIX")))
	c := lockx.New(b)
	e, err := leader.New(c, os.Getenv("LEADER_TEST_NAME"), leader.WithIdentity("child"), leader.WithLease(lease))
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(2)
	}
	ctx := context.Background()
	t, err := e.Campaign(ctx)
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(2)
	}
	fmt.Println("LEAD", t.Token())
	res := os.Getenv("LEADER_TEST_RESOURCE")
	write := func(what string) {
		v := "ok"
		if err := b.Fence(ctx, res, t.Token()); errors.Is(err, lockx.ErrStaleToken) {
			v = "stale"
		} else if err != nil {
			v = "error " + err.Error()
		}
		fmt.Println(what, t.Token(), v)
	}
	for res != "" && t.Context().Err() == nil {
		// A leader checks its term before each write, and the resource
		// checks it again: the write may still race the loss.
		write("WRITE")
		time.Sleep(10 * time.Millisecond)
	}
	<-t.Done()
	fmt.Println("LOST", strings.ReplaceAll(context.Cause(t.Context()).Error(), "\n", " "))
	if res != "" {
		// A write that was already on its way when the leader paused: the
		// resource alone can refuse it.
		write("LATE")
	}
	os.Exit(0)
}
