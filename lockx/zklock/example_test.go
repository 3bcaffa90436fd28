package zklock_test

import (
	"context"
	"fmt"
	"os"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/zklock"
)

// exampleServers is the ensemble the examples use: $LOCKX_TEST_ZOOKEEPER_ADDR,
// or the test binary's own standalone server.
func exampleServers() []string {
	if a := os.Getenv("LOCKX_TEST_ZOOKEEPER_ADDR"); a != "" {
		return []string{a}
	}
	addr, err := testenv.SharedZooKeeperAddr()
	if err != nil {
		panic(err)
	}
	return []string{addr}
}

func Example() {
	ctx := context.Background()
	backend, err := zklock.Dial(ctx, exampleServers(), zklock.WithRoot("/lockx-example"))
	if err != nil {
		panic(err)
	}
	locks := lockx.New(backend)
	defer locks.Close() // also closes the backend and its session

	lock, err := locks.Acquire(ctx, "order:42")
	if err != nil {
		fmt.Println("not acquired:", err)
		return
	}
	// The token is the czxid of the lock's znode: pass it with every write
	// the lock protects, and let the resource reject smaller ones.
	fmt.Println("token issued:", lock.Token() > 0)

	// lock.Context() ends if the session expires or stays disconnected
	// for a quarter of the session timeout.
	select {
	case <-lock.Context().Done():
		fmt.Println("lost")
	default:
		fmt.Println("held")
	}
	fmt.Println(lock.Release(ctx))
	// Output:
	// token issued: true
	// held
	// <nil>
}
