// Package testenv is the test environment every lockx test package uses:
// the machine's long-running services (Redis, PostgreSQL, MariaDB) and
// throwaway redis-server processes — single servers, a Redis Cluster and a
// Sentinel setup — and standalone ZooKeeper servers, on ports 7000-7899.
//
// Every test package starts with
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
//
// which checks for leaked goroutines after all tests and stops the shared
// Cluster and Sentinel servers, or, in a copy of the binary started by
// StartChild, runs the child's role instead of the tests. In both it first
// moves the packages' default wall clock when LOCKX_TEST_CLOCK_OFFSET asks
// for it (ClockOffsetEnv).
//
// A missing service or redis-server binary skips the test, except under
// CI=true, where it fails it. Processes are stopped by pid: at t.Cleanup for
// per-test servers, by Main for shared ones, and on Linux by the kernel
// (Pdeathsig) if the test binary dies without cleaning up.
package testenv

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

// shared holds what Main must stop: servers started once per binary.
var shared struct {
	mu      sync.Mutex
	main    bool           // Main is running the tests
	servers []*RedisServer // in start order
	others  []func()       // retire other shared servers (ZooKeeper)
	dir     string         // parent of their directories
	stopped bool
}

// Main runs the package's tests, then stops every shared server started
// through this package (SharedCluster, SharedSentinel) and checks with
// goleak that no goroutine leaked. A leak after passing tests fails the
// binary. Use: func TestMain(m *testing.M) { testenv.Main(m) }
func Main(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) (code int) {
	if err := moveClock(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if code, isChild := runChild(); isChild {
		return code
	}
	shared.mu.Lock()
	shared.main = true
	shared.mu.Unlock()
	defer stopShared() // also on a panic in the main goroutine

	code = m.Run()
	stopShared()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: goroutines leaked by the tests: %v\n", err)
			return 1
		}
	}
	return code
}

// sharedDir returns a new directory for a shared server, under one
// per-binary temporary directory that stopShared removes.
func sharedDir(name string) (string, error) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.dir == "" {
		d, err := os.MkdirTemp("", "lockx-testenv-")
		if err != nil {
			return "", err
		}
		shared.dir = d
	}
	return os.MkdirTemp(shared.dir, name+"-")
}

// requireMain fails tb if the binary does not run under testenv.Main: shared
// servers would then never be stopped.
func requireMain(tb testing.TB) {
	tb.Helper()
	shared.mu.Lock()
	ok := shared.main && !shared.stopped
	shared.mu.Unlock()
	if !ok {
		tb.Fatal("testenv: shared servers need func TestMain(m *testing.M) { testenv.Main(m) } in this package")
	}
}

func addShared(servers ...*RedisServer) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	shared.servers = append(shared.servers, servers...)
}

// stopShared stops all shared servers (concurrently; sentinels were
// registered last and nothing depends on the order) and removes their
// directories.
func stopShared() {
	shared.mu.Lock()
	servers, others, dir := shared.servers, shared.others, shared.dir
	shared.servers, shared.others, shared.dir, shared.stopped = nil, nil, "", true
	shared.mu.Unlock()
	retireAll(servers)
	for _, retire := range others {
		retire()
	}
	if dir != "" {
		_ = os.RemoveAll(dir)
	}
}

// retireAll stops servers concurrently and releases their ports.
func retireAll(servers []*RedisServer) {
	var wg sync.WaitGroup
	for _, s := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.retire()
		}()
	}
	wg.Wait()
}
