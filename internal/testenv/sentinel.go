package testenv

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	sentinelMasterName   = "mymaster"
	sentinelQuorum       = 2
	sentinelDownAfterMs  = 1000
	sentinelFailoverMs   = 3000
	sentinelReplicaCount = 2
	sentinelCount        = 3
)

// Sentinel is a Redis Sentinel setup: one master, 2 replicas and 3
// sentinels monitoring the master as MasterName with quorum 2,
// down-after-milliseconds 1000 and failover-timeout 3000. The server
// fields describe the topology as started; after a failover ask
// MasterAddr.
type Sentinel struct {
	// MasterName is the name the sentinels monitor the master under.
	MasterName string
	// SentinelAddrs are the sentinels' addresses (go-redis
	// FailoverOptions.SentinelAddrs).
	SentinelAddrs []string
	// Master is the master as started.
	Master *RedisServer
	// Replicas replicate Master.
	Replicas []*RedisServer
	// Sentinels are the redis-server --sentinel processes.
	Sentinels []*RedisServer
}

func (s *Sentinel) servers() []*RedisServer {
	all := append([]*RedisServer{s.Master}, s.Replicas...)
	return append(all, s.Sentinels...)
}

// MasterAddr returns the current master's address as reported by the
// first sentinel that answers, failing tb if none does.
func (s *Sentinel) MasterAddr(tb testing.TB) string {
	tb.Helper()
	var lastErr error
	for _, a := range s.SentinelAddrs {
		addr, err := sentinelMaster(a, s.MasterName)
		if err == nil {
			return addr
		}
		lastErr = err
	}
	tb.Fatalf("testenv: no sentinel knows the master of %s: %v", s.MasterName, lastErr)
	return ""
}

var sharedSentinel struct {
	once sync.Once
	s    *Sentinel
	err  error
}

// SharedSentinel returns the binary's Sentinel setup, starting it on first
// use: a master, 2 replicas and 3 sentinels on free ports in 7000-7899,
// waiting until every sentinel agrees on the master and sees both replicas
// and the other two sentinels. It takes about 2.5 s to start and is
// stopped by Main (required). Tests share it: use distinct keys, and do
// not stop, kill or fail over its servers (use StartSentinel for that).
func SharedSentinel(t testing.TB) *Sentinel {
	t.Helper()
	requireRedisBinary(t)
	requireMain(t)
	sharedSentinel.once.Do(func() {
		sharedSentinel.s, sharedSentinel.err = startSentinel(sharedDir)
		if sharedSentinel.err == nil {
			addShared(sharedSentinel.s.servers()...)
		}
	})
	if sharedSentinel.err != nil {
		t.Fatalf("testenv: starting the shared Sentinel setup: %v", sharedSentinel.err)
	}
	return sharedSentinel.s
}

// StartSentinel starts a private Sentinel setup, like SharedSentinel's, for
// the calling test and stops it at t.Cleanup. Use it for tests that kill
// the master or otherwise force a failover.
func StartSentinel(t testing.TB) *Sentinel {
	t.Helper()
	requireRedisBinary(t)
	s, err := startSentinel(func(string) (string, error) { return t.TempDir(), nil })
	if err != nil {
		t.Fatalf("testenv: starting a Sentinel setup: %v", err)
	}
	t.Cleanup(func() {
		// Sentinels first, so they do not react to the data nodes going.
		retireAll(s.Sentinels)
		retireAll(s.servers())
	})
	return s
}

func startSentinel(mkdir func(name string) (string, error)) (_ *Sentinel, err error) {
	st := &Sentinel{MasterName: sentinelMasterName}
	defer func() {
		if err != nil {
			var started []*RedisServer
			for _, s := range st.servers() {
				if s != nil {
					started = append(started, s)
				}
			}
			retireAll(started)
		}
	}()
	dir, err := mkdir("master")
	if err != nil {
		return nil, err
	}
	if st.Master, err = startServer(dir, false, plainArgs(nil)); err != nil {
		return nil, err
	}
	for i := 0; i < sentinelReplicaCount; i++ {
		dir, err := mkdir("replica" + strconv.Itoa(i))
		if err != nil {
			return nil, err
		}
		r, err := startServer(dir, false, plainArgs([]string{"--replicaof", "127.0.0.1", strconv.Itoa(st.Master.Port)}))
		if err != nil {
			return nil, err
		}
		st.Replicas = append(st.Replicas, r)
	}
	deadline := time.Now().Add(setupTimeout)
	// Replicas linked before the sentinels start: the sentinels' first INFO
	// of the master then already lists them.
	if err = waitUntil(deadline, "replicas linked", func() error {
		for _, r := range st.Replicas {
			if err := replicaLinked(r.Addr); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	for i := 0; i < sentinelCount; i++ {
		dir, err := mkdir("sentinel" + strconv.Itoa(i))
		if err != nil {
			return nil, err
		}
		s, err := startServer(dir, false, sentinelArgs(st.Master.Port))
		if err != nil {
			return nil, err
		}
		st.Sentinels = append(st.Sentinels, s)
		st.SentinelAddrs = append(st.SentinelAddrs, s.Addr)
	}
	if err = waitUntil(deadline, "sentinels agree", func() error { return sentinelsReady(st) }); err != nil {
		return nil, err
	}
	return st, nil
}

// sentinelArgs writes the sentinel's configuration file (sentinels rewrite
// it, so it must be a file of their own) and returns the arguments.
func sentinelArgs(masterPort int) argsFunc {
	return func(port int, dir string) ([]string, error) {
		conf := filepath.Join(dir, "sentinel.conf")
		text := fmt.Sprintf(`port %d
bind 127.0.0.1
daemonize no
dir %s
logfile %s
sentinel monitor %s 127.0.0.1 %d %d
sentinel down-after-milliseconds %[4]s %[7]d
sentinel failover-timeout %[4]s %[8]d
sentinel parallel-syncs %[4]s 1
`, port, dir, filepath.Join(dir, "redis.log"), sentinelMasterName, masterPort, sentinelQuorum,
			sentinelDownAfterMs, sentinelFailoverMs)
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			return nil, err
		}
		return []string{conf, "--sentinel"}, nil
	}
}

// sentinelMaster asks one sentinel for the master's address.
func sentinelMaster(sentinel, name string) (string, error) {
	r, err := redisDo(sentinel, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", name)
	if err != nil {
		return "", err
	}
	hp, _ := r.([]any)
	if len(hp) != 2 {
		return "", fmt.Errorf("%s: no master for %s", sentinel, name)
	}
	host, _ := hp[0].(string)
	port, _ := hp[1].(string)
	return net.JoinHostPort(host, port), nil
}

// sentinelsReady: every sentinel names the started master, sees both
// replicas up and linked, and knows the other sentinels.
func sentinelsReady(st *Sentinel) error {
	for _, a := range st.SentinelAddrs {
		m, err := sentinelMaster(a, st.MasterName)
		if err != nil {
			return err
		}
		if m != st.Master.Addr {
			return fmt.Errorf("sentinel %s names master %s, want %s", a, m, st.Master.Addr)
		}
		r, err := redisDo(a, "SENTINEL", "REPLICAS", st.MasterName)
		if err != nil {
			return err
		}
		list, _ := r.([]any)
		ok := 0
		for _, e := range list {
			p := pairs(e)
			if p["flags"] == "slave" && p["master-link-status"] == "ok" {
				ok++
			}
		}
		if ok != len(st.Replicas) {
			return fmt.Errorf("sentinel %s sees %d of %d replicas up", a, ok, len(st.Replicas))
		}
		r, err = redisDo(a, "SENTINEL", "SENTINELS", st.MasterName)
		if err != nil {
			return err
		}
		if list, _ := r.([]any); len(list) != len(st.SentinelAddrs)-1 {
			return fmt.Errorf("sentinel %s knows %d other sentinels, want %d", a, len(list), len(st.SentinelAddrs)-1)
		}
	}
	return nil
}

// sentinelFlags returns the flags a sentinel reports for the master, for
// diagnostics.
func sentinelFlags(sentinel, name string) string {
	r, err := redisDo(sentinel, "SENTINEL", "MASTER", name)
	if err != nil {
		return err.Error()
	}
	return strings.TrimSpace(pairs(r)["flags"])
}
