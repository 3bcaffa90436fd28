package etcdlock_test

import (
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"

	"github.com/lockx-go/lockx/lockx/etcdlock"
	"github.com/lockx-go/lockx/lockx/etcdlock/etcdtest"
)

// single is the one-member cluster most tests share; fault tests start
// clusters of their own.
var single *etcdtest.Cluster

func TestMain(m *testing.M) {
	// The suites mostly wait (leases, wake-ups), not compute: run more of
	// them at once than the default of one per CPU, unless told otherwise.
	flag.Parse()
	if f := flag.Lookup("test.parallel"); f != nil && !isSet("test.parallel") {
		_ = f.Value.Set("4")
	}
	c, err := etcdtest.Start(etcdtest.Config{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcdlock tests: start embedded etcd:", err)
		os.Exit(1)
	}
	single = c
	code := m.Run()
	c.Close()
	if code == 0 {
		if err := goleak.Find(leakOptions()...); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func isSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// leakOptions ignores the peer HTTP connections that members of a
// stopped in-process cluster may leave open for a while (etcd's rafthttp
// over net/http, after a member was stopped and restarted). lockx uses no
// net/http: every goroutine of its own must be gone.
func leakOptions() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*conn).serve"),
		goleak.IgnoreAnyFunction("net/http.(*connReader).backgroundRead"),
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// testPrefix is a key prefix no other test shares.
func testPrefix() string { return "lockxtest/" + randHex(4) + "/" }

// client returns a client of c, closed at cleanup.
func client(t testing.TB, c *etcdtest.Cluster) *clientv3.Client {
	t.Helper()
	cli, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// backend returns a Backend over cli with a fresh prefix unless opts set
// one, closed at cleanup.
func backend(t testing.TB, cli *clientv3.Client, opts ...etcdlock.Option) *etcdlock.Backend {
	t.Helper()
	b := etcdlock.New(cli, append([]etcdlock.Option{etcdlock.WithPrefix(testPrefix())}, opts...)...)
	t.Cleanup(func() { _ = b.Close() })
	return b
}
