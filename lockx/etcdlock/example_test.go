package etcdlock_test

import (
	"context"
	"fmt"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/etcdlock"
	"github.com/lockx-go/lockx/lockx/etcdlock/etcdtest"
)

func Example() {
	// An etcd server in this process, for the example; a program passes
	// its cluster's endpoints to clientv3.New instead.
	cluster, err := etcdtest.Start(etcdtest.Config{})
	if err != nil {
		panic(err)
	}
	defer cluster.Close()
	cli, err := cluster.Client()
	if err != nil {
		panic(err)
	}
	defer cli.Close()

	ctx := context.Background()
	locks := lockx.New(etcdlock.New(cli, etcdlock.WithPrefix("example/")))
	defer locks.Close()

	lock, err := locks.Acquire(ctx, "order:42")
	if err != nil {
		fmt.Println("not acquired:", err)
		return
	}
	defer lock.Release(ctx)
	// The token is the lock key's create revision: pass it with every
	// write the lock protects.
	fmt.Println("holding order:42 with a token:", lock.Token() > 0)

	_, err = locks.TryAcquire(ctx, "order:42")
	fmt.Println("second owner:", err)
	// Output:
	// holding order:42 with a token: true
	// second owner: lockx: acquire "order:42": lock not acquired
}
