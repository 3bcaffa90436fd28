// Command etcd is the fault suite's etcd binary, one program in two roles
// so that the suite builds it once:
//
//	etcd server <etcd flags>   a real etcd server (go.etcd.io/etcd/server/v3's
//	                           own main, etcdmain), run as a member process
//	etcd <holder flags>        the suite's lock holder (holderkit) with the
//	                           backend -backend=etcd: etcdlock over the
//	                           comma-separated client URLs of -addr
//
// It lives in a module of its own, as lockx/etcdlock does, so that etcd's
// dependencies stay out of the root module; it may still use the suite's
// holder (faults/internal/holderkit), because Go's internal rule follows
// import paths, not modules. The tests that run it are the root module's
// (faults/etcd_test.go), with every other backend's.
package main

import (
	"context"
	"os"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/etcdmain"
	"go.uber.org/zap"

	"github.com/lockx-go/lockx/faults/internal/holderkit"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/etcdlock"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "server" {
		etcdmain.Main(append([]string{"etcd"}, os.Args[2:]...))
		return
	}
	holderkit.Main(holderkit.Backends{"etcd": openEtcd})
}

// openEtcd is etcdlock over a client of the endpoints in addr, with
// timeouts short enough for faults of a few seconds: a member gone or cut
// off is noticed within about a second and the client moves to another.
func openEtcd(_ context.Context, addr string) (driver.Backend, func(), error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            strings.Split(addr, ","),
		DialTimeout:          time.Second,
		DialKeepAliveTime:    500 * time.Millisecond,
		DialKeepAliveTimeout: 500 * time.Millisecond,
		Logger:               zap.NewNop(),
	})
	if err != nil {
		return nil, nil, err
	}
	return etcdlock.New(cli, etcdlock.WithOpTimeout(time.Second)), func() { _ = cli.Close() }, nil
}
