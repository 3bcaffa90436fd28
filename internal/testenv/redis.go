package testenv

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	// Throwaway servers live on 7000-7899; 7900-7999 belong to the bench.
	portMin = 7000
	portMax = 7899
	// A cluster node also listens on its port + 10000 (the cluster bus).
	busOffset = 10000

	startTimeout = 10 * time.Second // until a started server answers PING
	stopGrace    = 5 * time.Second  // SIGTERM to SIGKILL
)

// RedisServer is one redis-server (or sentinel) process started by testenv.
// Addr, Port and Dir never change; Pid is the pid of the current (or most
// recent) process and changes on Restart. Methods are safe for concurrent
// use, but read Pid only while no Restart runs.
type RedisServer struct {
	// Addr is "127.0.0.1:Port".
	Addr string
	// Port is the TCP port, chosen by testenv in 7000-7899.
	Port int
	// Dir is the server's working and data directory; its log is
	// Dir/redis.log.
	Dir string
	// Pid is the process id of the server.
	Pid int

	args []string // redis-server arguments, reused by Restart
	proc          // Stop, Kill, Restart, Running
}

// errPortTaken means another process owns the chosen port; pick another.
var errPortTaken = errors.New("port taken by another process")

// StartRedis starts a throwaway redis-server for the calling test: in a
// fresh t.TempDir(), on a free port in 7000-7899, with
// --bind 127.0.0.1 --save "" --appendonly no --repl-diskless-sync-delay 0
// unless args set those flags themselves. It waits until the server answers
// PING and stops it (by pid) in t.Cleanup. Extra args are passed as
// redis-server flags, e.g. "--replicaof", "127.0.0.1 7001"; --port, --dir,
// --logfile and --daemonize are always set by testenv. If redis-server is
// not on PATH the test fails under CI=true and is skipped otherwise.
func StartRedis(t testing.TB, args ...string) *RedisServer {
	t.Helper()
	requireRedisBinary(t)
	s, err := startServer(t.TempDir(), false, plainArgs(args))
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(s.retire)
	return s
}

// restartLocked stops a server (SIGTERM) and starts it again on the same
// port, retrying for up to 2 s while the port is still held by the exiting
// process or taken by another.
func restartLocked(stop func(syscall.Signal), start func() error) error {
	stop(syscall.SIGTERM)
	var err error
	for try := 0; try < 20; try++ {
		if err = start(); !errors.Is(err, errPortTaken) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

// stopProcess sends sig to cmd's pid unless it has exited (done closed),
// escalates to SIGKILL after stopGrace, and returns once it is reaped.
func stopProcess(cmd *exec.Cmd, done <-chan struct{}, sig syscall.Signal) {
	select {
	case <-done:
		return
	default:
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(stopGrace):
		_ = cmd.Process.Kill()
		<-done
	}
}

// startProcess spawns cmd and returns a channel closed once it has exited
// and been reaped.
func startProcess(cmd *exec.Cmd) (<-chan struct{}, error) {
	if err := spawn(cmd); err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		spawnDone()
		close(done)
	}()
	return done, nil
}

// startLocked starts the process and waits until it answers as itself.
func (s *RedisServer) startLocked() error {
	cmd := exec.Command(redisServerPath, s.args...)
	cmd.Dir = s.Dir
	if err := s.launchLocked(cmd); err != nil {
		return err
	}
	pid := strconv.Itoa(s.Pid)
	return s.awaitLocked(startTimeout, 20*time.Millisecond, func() error {
		info, err := redisString(s.Addr, "INFO", "server")
		if err != nil {
			return err
		}
		if infoField(info, "process_id") != pid {
			return errPortTaken // someone else's server answers on our port
		}
		if pong, err := redisString(s.Addr, "PING"); err != nil || pong != "PONG" {
			return fmt.Errorf("PING: %q, %v", pong, err)
		}
		return nil
	}, func(st *os.ProcessState) error {
		log := tail(s.log)
		if strings.Contains(log, "Address already in use") || answers(s.Addr) {
			return errPortTaken
		}
		return fmt.Errorf("redis-server on port %d exited during start-up (%v); %s:\n%s", s.Port, st, s.log, log)
	})
}

// argsFunc builds redis-server's arguments for a chosen port; it may write
// files (sentinel.conf) into dir.
type argsFunc func(port int, dir string) ([]string, error)

// startServer starts one server in dir on a fresh port, retrying with
// another port when the chosen one is taken by a concurrent test binary.
func startServer(dir string, cluster bool, mkArgs argsFunc) (*RedisServer, error) {
	var s *RedisServer
	err := onFreePort("redis-server", 1, cluster, func(ports []int) error {
		args, err := mkArgs(ports[0], dir)
		if err != nil {
			return err
		}
		s = &RedisServer{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])), Port: ports[0], Dir: dir, args: args}
		s.init("redis-server", s.Addr, ports, &s.Pid, filepath.Join(dir, "redis.log"), s.startLocked)
		return s.first()
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// flagDefaults are added by plainArgs unless the caller's args set them.
var flagDefaults = [][]string{
	{"--bind", "127.0.0.1"},
	{"--save", ""},
	{"--appendonly", "no"},
	{"--repl-diskless-sync-delay", "0"},
}

// plainArgs returns the arguments of a normal (non-sentinel) server: the
// defaults, then extra, then what testenv must control.
func plainArgs(extra []string) argsFunc {
	extra = append([]string(nil), extra...)
	return func(port int, dir string) ([]string, error) {
		set := make(map[string]bool)
		for _, a := range extra {
			if strings.HasPrefix(a, "--") {
				set[a] = true
			}
		}
		var args []string
		for _, d := range flagDefaults {
			if !set[d[0]] {
				args = append(args, d...)
			}
		}
		args = append(args, extra...)
		return append(args,
			"--port", strconv.Itoa(port),
			"--dir", dir,
			"--logfile", filepath.Join(dir, "redis.log"),
			"--daemonize", "no",
		), nil
	}
}

// Port reservation. Ports handed out in this binary stay reserved until
// their server retires; other binaries are detected by probing.
var ports struct {
	sync.Mutex
	used map[int]bool
}

func reservePort(cluster bool) (int, error) {
	ports.Lock()
	defer ports.Unlock()
	if ports.used == nil {
		ports.used = make(map[int]bool)
	}
	for try := 0; try < 300; try++ {
		p := portMin + rand.IntN(portMax-portMin+1)
		if ports.used[p] || !portFree(p) || (cluster && !portFree(p+busOffset)) {
			continue
		}
		ports.used[p] = true
		return p, nil
	}
	return 0, fmt.Errorf("testenv: no free port found in %d-%d", portMin, portMax)
}

func releasePort(p int) {
	ports.Lock()
	defer ports.Unlock()
	delete(ports.used, p)
}

// portFree reports whether nothing answers on 127.0.0.1:p and we can bind it.
func portFree(p int) bool {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	if answers(addr) {
		return false
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// answers reports whether something accepts TCP connections on addr.
func answers(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

// redisServerPath is the resolved redis-server binary; see requireRedisBinary.
var (
	redisServerPath string
	redisLookup     sync.Once
	redisLookupErr  error
)

// requireRedisBinary fails (CI=true) or skips tb when redis-server is not
// on PATH.
func requireRedisBinary(tb testing.TB) {
	tb.Helper()
	redisLookup.Do(func() {
		redisServerPath, redisLookupErr = exec.LookPath("redis-server")
	})
	if redisLookupErr != nil {
		unavailable(tb, "redis-server is not on PATH (%v); install it (Debian: apt-get install redis-server) or run scripts/ensure-services.sh", redisLookupErr)
	}
}
