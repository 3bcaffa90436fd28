package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Ports tried for the benchmark's own redis-servers.
const (
	firstPort = 7900
	lastPort  = 7999
)

// RedisServer is a redis-server the benchmark started and owns: no
// persistence, loopback only, a temporary directory, stopped by pid.
type RedisServer struct {
	Addr string
	cmd  *exec.Cmd
	dir  string
	exit chan struct{}
}

// StartRedis starts a redis-server on the first free port of 7900–7999.
// A port taken between the check and the server's bind is skipped.
func StartRedis(ctx context.Context) (*RedisServer, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("bench: redis-server not found (apt-get install redis-server): %w", err)
	}
	var lastErr error
	for port := firstPort; port <= lastPort; port++ {
		if !portFree(port) {
			continue
		}
		s, err := startRedisOn(ctx, bin, port)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, fmt.Errorf("bench: no redis-server could start on ports %d-%d: %w", firstPort, lastPort, lastErr)
}

func portFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

func startRedisOn(ctx context.Context, bin string, port int) (*RedisServer, error) {
	dir, err := os.MkdirTemp("", "lockxbench-redis-")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin,
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir,
		"--daemonize", "no", "--loglevel", "warning",
		"--logfile", filepath.Join(dir, "redis.log"))
	// Own process group: a Ctrl-C in the terminal reaches only us, and we stop
	// the server in order. Pdeathsig is the safety net if we die uncleanly.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &RedisServer{Addr: fmt.Sprintf("127.0.0.1:%d", port), cmd: cmd, dir: dir, exit: make(chan struct{})}
	go func() { cmd.Wait(); close(s.exit) }()

	rdb := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer rdb.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := rdb.Ping(ctx).Err()
		if err == nil {
			return s, nil
		}
		select {
		case <-s.exit:
			s.Stop()
			return nil, fmt.Errorf("redis-server on port %d exited: %s", port, tail(filepath.Join(dir, "redis.log")))
		default:
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			s.Stop()
			return nil, fmt.Errorf("redis-server on port %d not answering: %w", port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop terminates the server by its pid (SIGTERM, then SIGKILL after 3 s)
// and removes its directory. It is safe to call more than once.
func (s *RedisServer) Stop() {
	if s == nil {
		return
	}
	stopPid(s.cmd, s.exit, 3*time.Second)
	os.RemoveAll(s.dir)
}

// stopPid stops a server the benchmark started: SIGTERM to its pid unless
// it has exited (exit closed), SIGKILL after grace.
func stopPid(cmd *exec.Cmd, exit <-chan struct{}, grace time.Duration) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	select {
	case <-exit:
	default:
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exit:
		case <-time.After(grace):
			_ = cmd.Process.Kill()
			<-exit
		}
	}
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	return strings.Join(lines, " | ")
}

// info returns the fields of one INFO section as a map.
func info(ctx context.Context, rdb *redis.Client, section string) (map[string]string, error) {
	txt, err := rdb.Info(ctx, section).Result()
	if err != nil {
		return nil, err
	}
	m := make(map[string]string)
	sc := bufio.NewScanner(strings.NewReader(txt))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, "#") {
			m[k] = v
		}
	}
	return m, nil
}

// commandCalls returns the number of calls per command since the last
// CONFIG RESETSTAT, from INFO commandstats (cmdstat_set:calls=12,...).
func commandCalls(ctx context.Context, rdb *redis.Client) (map[string]int64, error) {
	m, err := info(ctx, rdb, "commandstats")
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(m))
	for k, v := range m {
		name, ok := strings.CutPrefix(k, "cmdstat_")
		if !ok {
			continue
		}
		calls, _, _ := strings.Cut(v, ",")
		if n, ok := strings.CutPrefix(calls, "calls="); ok {
			c, _ := strconv.ParseInt(n, 10, 64)
			out[name] = c
		}
	}
	return out, nil
}

// usedMemory returns the memory Redis uses for its data: INFO memory
// used_memory less mem_clients_normal, the clients' query and output
// buffers. Those grow and shrink with how many commands a connection sends
// at once (a pipeline leaves a larger query buffer behind than a lone
// command), not with the keys held, so they are no part of a lock's cost.
func usedMemory(ctx context.Context, rdb *redis.Client) (int64, error) {
	m, err := info(ctx, rdb, "memory")
	if err != nil {
		return 0, err
	}
	used, ok := m["used_memory"]
	clients, ok2 := m["mem_clients_normal"]
	if !ok || !ok2 {
		return 0, errors.New("bench: INFO memory has no used_memory or mem_clients_normal")
	}
	u, err1 := strconv.ParseInt(used, 10, 64)
	c, err2 := strconv.ParseInt(clients, 10, 64)
	return u - c, errors.Join(err1, err2)
}

// emptyKeyspace flushes the bench's own server (it serves nothing else)
// before a memory reading, so that every case grows the keyspace's hash
// tables from empty: a table left large by an earlier case's keys would
// otherwise let the next case's keys in without paying for their buckets.
func emptyKeyspace(ctx context.Context, rdb *redis.Client) error {
	return rdb.Do(ctx, "flushall", "sync").Err() // freed before the reading, not by a background thread
}

// serverCPU returns the redis-server's user+system CPU seconds.
func serverCPU(ctx context.Context, rdb *redis.Client) (float64, error) {
	m, err := info(ctx, rdb, "cpu")
	if err != nil {
		return 0, err
	}
	u, err1 := strconv.ParseFloat(m["used_cpu_user"], 64)
	s, err2 := strconv.ParseFloat(m["used_cpu_sys"], 64)
	return u + s, errors.Join(err1, err2)
}
