package testenv

import (
	"errors"
	"fmt"
	"io"
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

	mu      sync.Mutex
	args    []string        // redis-server arguments, reused by Restart
	cluster bool            // also owns the cluster bus port
	cmd     *exec.Cmd       // nil when not running
	done    <-chan struct{} // closed once cmd has been reaped
	freed   bool            // port released, server retired
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

// Stop shuts the server down: SIGTERM to its pid, then SIGKILL if it has
// not exited within 5 s. It returns once the process has been reaped and
// does nothing if the server is not running. Restart may follow.
func (s *RedisServer) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked(syscall.SIGTERM)
}

// Kill crashes the server: SIGKILL to its pid, returning once the process
// has been reaped. Restart brings it back on the same port and directory.
func (s *RedisServer) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked(syscall.SIGKILL)
}

// Restart starts the server again with the same port, directory and
// arguments (stopping it first if it is still running) and waits until it
// answers PING. It fails tb if the port has been taken in the meantime or
// the server does not come up.
func (s *RedisServer) Restart(tb testing.TB) {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.freed {
		tb.Fatalf("testenv: Restart of %s after its test ended", s.Addr)
	}
	err := restartLocked(s.stopLocked, s.startLocked)
	if err != nil {
		tb.Fatalf("testenv: restarting redis-server on %s: %v", s.Addr, err)
	}
}

// Running reports whether the server process is alive (started and not yet
// reaped).
func (s *RedisServer) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return false
	}
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// retire stops the server for good and gives its port back.
func (s *RedisServer) retire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked(syscall.SIGTERM)
	if !s.freed {
		s.freed = true
		releasePort(s.Port)
	}
}

func (s *RedisServer) stopLocked(sig syscall.Signal) {
	if s.cmd == nil {
		return
	}
	stopProcess(s.cmd, s.done, sig)
	s.cmd = nil
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
	done, err := startProcess(cmd)
	if err != nil {
		return fmt.Errorf("starting redis-server: %w", err)
	}
	s.cmd, s.done, s.Pid = cmd, done, cmd.Process.Pid
	pid := strconv.Itoa(cmd.Process.Pid)

	deadline := time.Now().Add(startTimeout)
	for {
		select {
		case <-done:
			s.cmd = nil
			log := s.logTail()
			if strings.Contains(log, "Address already in use") || answers(s.Addr) {
				return errPortTaken
			}
			return fmt.Errorf("redis-server on port %d exited during start-up (%v); %s:\n%s",
				s.Port, cmd.ProcessState, s.logPath(), log)
		default:
		}
		if info, err := redisString(s.Addr, "INFO", "server"); err == nil {
			if infoField(info, "process_id") != pid {
				// Someone else's server answers on our port.
				s.stopLocked(syscall.SIGKILL)
				return errPortTaken
			}
			if pong, err := redisString(s.Addr, "PING"); err == nil && pong == "PONG" {
				return nil
			}
		}
		if time.Now().After(deadline) {
			s.stopLocked(syscall.SIGKILL)
			return fmt.Errorf("redis-server on port %d did not answer PING within %v; %s:\n%s",
				s.Port, startTimeout, s.logPath(), s.logTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *RedisServer) logPath() string { return filepath.Join(s.Dir, "redis.log") }

// logTail returns the end of the server's log, for error messages.
func (s *RedisServer) logTail() string {
	f, err := os.Open(s.logPath())
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	defer f.Close()
	const max = 2048
	if fi, err := f.Stat(); err == nil && fi.Size() > max {
		_, _ = f.Seek(-max, io.SeekEnd)
	}
	b, _ := io.ReadAll(f)
	return strings.TrimSpace(string(b))
}

// argsFunc builds redis-server's arguments for a chosen port; it may write
// files (sentinel.conf) into dir.
type argsFunc func(port int, dir string) ([]string, error)

// startServer starts one server in dir on a fresh port, retrying with
// another port when the chosen one is taken by a concurrent test binary.
func startServer(dir string, cluster bool, mkArgs argsFunc) (*RedisServer, error) {
	var lastErr error
	for try := 0; try < 10; try++ {
		port, err := reservePort(cluster)
		if err != nil {
			return nil, err
		}
		args, err := mkArgs(port, dir)
		if err != nil {
			releasePort(port)
			return nil, err
		}
		s := &RedisServer{
			Addr:    net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
			Port:    port,
			Dir:     dir,
			args:    args,
			cluster: cluster,
		}
		s.mu.Lock()
		err = s.startLocked()
		s.mu.Unlock()
		if err == nil {
			return s, nil
		}
		releasePort(port)
		if !errors.Is(err, errPortTaken) {
			return nil, err
		}
		lastErr = err
	}
	return nil, fmt.Errorf("no free port for redis-server in %d-%d: %w", portMin, portMax, lastErr)
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
