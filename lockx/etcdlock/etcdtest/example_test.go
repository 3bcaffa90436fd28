package etcdtest_test

import (
	"fmt"

	"github.com/lockx-go/lockx/lockx/etcdlock/etcdtest"
)

// Start runs etcd inside the test process: here a three-member cluster on
// loopback ports, whose members a fault test may stop and restart.
func Example() {
	cluster, err := etcdtest.Start(etcdtest.Config{Members: 3})
	if err != nil {
		fmt.Println("etcd did not start:", err)
		return
	}
	defer cluster.Close()
	fmt.Println(len(cluster.Endpoints()), "members")
	// Output: 3 members
}
