package redislock_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/redislock"
)

// A Redlock over five independent Redis primaries. The example needs five
// servers, so it is compiled but not run.
func ExampleNewQuorum() {
	var nodes []redis.UniversalClient
	for _, addr := range []string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379", "10.0.0.4:6379", "10.0.0.5:6379"} {
		// No retries (the quorum retries) and one dial: a dead node fails at once.
		rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1})
		defer rdb.Close()
		nodes = append(nodes, rdb)
	}
	q := redislock.NewQuorum(nodes,
		redislock.WithPrefix("billing:"),                    // every node Backend's option
		redislock.WithNodeTimeout(20*time.Millisecond),      // per node, per call
		redislock.WithQuorumDrift(0.01, 2*time.Millisecond)) // Redlock's default allowance
	locks := lockx.New(q)
	defer locks.Close()

	ctx := context.Background()
	lock, err := locks.Acquire(ctx, "invoice:7", lockx.WithWait(2*time.Second))
	if err != nil {
		fmt.Println(err) // ErrUnavailable when no majority answers
		return
	}
	defer lock.Release(ctx)
	// Present the token to the resource: Redlock alone does not exclude a
	// paused holder or a node that forgot the key.
	fmt.Println("token:", lock.Token())
}
