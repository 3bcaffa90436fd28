package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/zklock"
)

// Sections and row names of the ZooKeeper tables.
const (
	zkSection       = "zk"
	zkHotSection    = "zkhot"
	nameZKRaw       = "go-zookeeper zk.Lock (its recipe: protected ephemeral sequential node, children, delete)"
	nameZKLockx     = "lockx Acquire + Release (zklock)"
	nameZKHotRaw    = "go-zookeeper zk.Lock (blocks on its predecessor's watch)"
	nameZKHotLockx  = "lockx Acquire (zklock, defaults)"
	zkUncontendedNs = 16
	zkJar           = "/usr/share/java/zookeeper.jar"
)

// ZKServer is a standalone ZooKeeper (a JVM) the benchmark started: default
// durability (forceSync), loopback only, a temporary directory, stopped by
// pid.
type ZKServer struct {
	Addr string
	cmd  *exec.Cmd
	dir  string
	exit chan struct{}
}

// StartZooKeeper starts ZooKeeper from Debian's zookeeper package on the
// first free port of 7900–7999.
func StartZooKeeper(ctx context.Context) (*ZKServer, error) {
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, fmt.Errorf("bench: java not found (apt-get install zookeeper): %w", errSkip)
	}
	if _, err := os.Stat(zkJar); err != nil {
		return nil, fmt.Errorf("bench: %s missing (apt-get install zookeeper): %w", zkJar, errSkip)
	}
	var lastErr error
	for port := lastPort; port >= firstPort; port-- { // from the top: redis-servers take the bottom
		if !portFree(port) {
			continue
		}
		s, err := startZKOn(ctx, java, port)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, fmt.Errorf("bench: no ZooKeeper could start on ports %d-%d: %w", firstPort, lastPort, lastErr)
}

func startZKOn(ctx context.Context, java string, port int) (*ZKServer, error) {
	dir, err := os.MkdirTemp("", "lockxbench-zk-")
	if err != nil {
		return nil, err
	}
	cfg := strings.Join([]string{
		"tickTime=2000", "maxClientCnxns=0", "admin.enableServer=false",
		"4lw.commands.whitelist=ruok",
		"dataDir=" + filepath.Join(dir, "data"),
		"clientPort=" + strconv.Itoa(port), "clientPortAddress=127.0.0.1",
	}, "\n") + "\n"
	if err := os.WriteFile(filepath.Join(dir, "zoo.cfg"), []byte(cfg), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	out, err := os.Create(filepath.Join(dir, "zookeeper.out"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	defer out.Close()
	cmd := exec.Command(java, "-Xmx512m", "-XX:+UseSerialGC", "-Dzookeeper.admin.enableServer=false",
		"-cp", dir+":"+zkJar, "org.apache.zookeeper.server.ZooKeeperServerMain", filepath.Join(dir, "zoo.cfg"))
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &ZKServer{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd, dir: dir, exit: make(chan struct{})}
	go func() { cmd.Wait(); close(s.exit) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if ok := zk.FLWRuok([]string{s.Addr}, time.Second); len(ok) == 1 && ok[0] {
			return s, nil
		}
		select {
		case <-s.exit:
			s.Stop()
			return nil, fmt.Errorf("ZooKeeper on port %d exited", port)
		default:
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			s.Stop()
			return nil, fmt.Errorf("ZooKeeper on port %d not answering", port)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop terminates the server by its pid (SIGTERM, then SIGKILL after 5 s)
// and removes its directory. It is safe to call more than once.
func (s *ZKServer) Stop() {
	if s == nil {
		return
	}
	stopPid(s.cmd, s.exit, 5*time.Second)
	os.RemoveAll(s.dir)
}

// ZooKeeper returns the address of the benchmark's ZooKeeper, starting it
// on first use.
func (e *Env) ZooKeeper(ctx context.Context) (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.zk == nil {
		s, err := StartZooKeeper(ctx)
		if err != nil {
			return "", err
		}
		e.zk = s
	}
	return e.zk.Addr, nil
}

// zkConn opens a go-zookeeper connection (one session) and waits for it.
func zkConn(ctx context.Context, addr string) (*zk.Conn, error) {
	c, _, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(nopLogger{}))
	if err != nil {
		return nil, err
	}
	for c.State() != zk.StateHasSession {
		if ctx.Err() != nil {
			c.Close()
			return nil, ctx.Err()
		}
		time.Sleep(5 * time.Millisecond)
	}
	return c, nil
}

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}

// zkRawLocker is go-zookeeper's own lock recipe on one connection.
type zkRawLocker struct{ conn *zk.Conn }

func (l *zkRawLocker) Lock(ctx context.Context, key string) (func(context.Context) error, error) {
	lk := zk.NewLock(l.conn, "/lockxbench-raw/"+key, zk.WorldACL(zk.PermAll))
	if err := lk.Lock(); err != nil {
		return nil, err
	}
	return func(context.Context) error { return lk.Unlock() }, nil
}

func (l *zkRawLocker) Pair(ctx context.Context, key string) error {
	unlock, err := l.Lock(ctx, key)
	if err != nil {
		return err
	}
	return unlock(ctx)
}

func (l *zkRawLocker) Close() error { l.conn.Close(); return nil }

func openZKRaw(ctx context.Context, e *Env) (Locker, error) {
	addr, err := e.ZooKeeper(ctx)
	if err != nil {
		return nil, err
	}
	c, err := zkConn(ctx, addr)
	if err != nil {
		return nil, err
	}
	return &zkRawLocker{conn: c}, nil
}

func openZKLockx(ctx context.Context, e *Env, opts ...lockx.Option) (Locker, error) {
	addr, err := e.ZooKeeper(ctx)
	if err != nil {
		return nil, err
	}
	b, err := zklock.Dial(ctx, []string{addr}, zklock.WithRoot("/lockxbench"))
	if err != nil {
		return nil, err
	}
	return &lockxLocker{c: lockx.New(b), opts: opts}, nil
}

func zkCases() []*Case {
	var cs []*Case
	for _, n := range []int{1, zkUncontendedNs} {
		group := groupGoroutines(n)
		pairs := func(name string, baseline bool, open func(ctx context.Context, e *Env) (Locker, error)) *Case {
			return &Case{Section: zkSection, Group: group, Name: name, Baseline: baseline, Quick: n > 1,
				Run: func(ctx context.Context, e *Env, p Params) (Sample, error) {
					lk, err := open(ctx, e)
					if err != nil {
						return nil, err
					}
					defer lk.Close()
					return runPGPairs(ctx, p, shared(lk, n)), nil
				}}
		}
		cs = append(cs,
			pairs(nameZKRaw, true, openZKRaw),
			pairs(nameZKLockx, false, func(ctx context.Context, e *Env) (Locker, error) {
				return openZKLockx(ctx, e, lockx.WithLease(benchLease))
			}))
	}
	hot := func(name string, baseline bool, open func(ctx context.Context, e *Env) (Locker, error)) *Case {
		return &Case{Section: zkHotSection, Group: hotGroup, Name: name, Baseline: baseline, Quick: true,
			Run: func(ctx context.Context, e *Env, p Params) (Sample, error) {
				lks, err := openN(hotClients, func() (Locker, error) { return open(ctx, e) })
				if err != nil {
					return nil, err
				}
				defer closeAll(lks)
				return runHandoffs(ctx, p, lks), nil
			}}
	}
	cs = append(cs,
		hot(nameZKHotRaw, true, openZKRaw),
		hot(nameZKHotLockx, false, func(ctx context.Context, e *Env) (Locker, error) { return openZKLockx(ctx, e) }),
	)
	return cs
}
