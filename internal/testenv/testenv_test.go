package testenv

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestMain(m *testing.M) { Main(m) }

func mustDo(t *testing.T, addr string, args ...string) any {
	t.Helper()
	r, err := redisDo(addr, args...)
	if err != nil {
		t.Fatalf("%s %v: %v", addr, args, err)
	}
	return r
}

func TestStartRedisLifecycle(t *testing.T) {
	s := StartRedis(t)
	if s.Port < portMin || s.Port > portMax {
		t.Fatalf("port %d outside %d-%d", s.Port, portMin, portMax)
	}
	if s.Addr != "127.0.0.1:"+strconv.Itoa(s.Port) {
		t.Fatalf("Addr %q does not match Port %d", s.Addr, s.Port)
	}
	if _, err := os.Stat(s.Dir); err != nil {
		t.Fatal(err)
	}
	info, _ := redisString(s.Addr, "INFO", "server")
	if got := infoField(info, "process_id"); got != strconv.Itoa(s.Pid) {
		t.Fatalf("server reports pid %s, Pid is %d", got, s.Pid)
	}
	cfg := pairs(mustDo(t, s.Addr, "CONFIG", "GET", "*"))
	if cfg["save"] != "" || cfg["appendonly"] != "no" || cfg["bind"] != "127.0.0.1" || cfg["dir"] != s.Dir {
		t.Fatalf("unexpected config: save=%q appendonly=%q bind=%q dir=%q", cfg["save"], cfg["appendonly"], cfg["bind"], cfg["dir"])
	}
	mustDo(t, s.Addr, "SET", "k", "v")

	oldPid := s.Pid
	if !s.Running() {
		t.Fatal("Running() = false for a started server")
	}
	s.Kill()
	if s.Running() || answers(s.Addr) {
		t.Fatal("server still answers after Kill")
	}
	s.Restart(t)
	if s.Pid == oldPid {
		t.Fatal("Restart kept the old pid")
	}
	if r := mustDo(t, s.Addr, "GET", "k"); r != nil {
		t.Fatalf("GET k after crash without persistence = %v, want nil", r)
	}
	s.Stop()
	s.Stop() // idempotent
	s.Kill() // also fine when stopped
	if answers(s.Addr) {
		t.Fatal("server still answers after Stop")
	}
	s.Restart(t) // Restart after Stop works too
	if pong, err := redisString(s.Addr, "PING"); err != nil || pong != "PONG" {
		t.Fatalf("PING after restart: %q %v", pong, err)
	}
}

func TestStartRedisArgs(t *testing.T) {
	m := StartRedis(t, "--appendonly", "yes")
	if got := pairs(mustDo(t, m.Addr, "CONFIG", "GET", "appendonly"))["appendonly"]; got != "yes" {
		t.Fatalf("appendonly = %q, want the caller's yes", got)
	}
	// Both spellings of a two-word flag work.
	r1 := StartRedis(t, "--replicaof", "127.0.0.1 "+strconv.Itoa(m.Port))
	r2 := StartRedis(t, "--replicaof", "127.0.0.1", strconv.Itoa(m.Port))
	mustDo(t, m.Addr, "SET", "replicated", "yes")
	for _, r := range []*RedisServer{r1, r2} {
		err := waitUntil(time.Now().Add(10*time.Second), "replication", func() error {
			if err := replicaLinked(r.Addr); err != nil {
				return err
			}
			if v, _ := redisDo(r.Addr, "GET", "replicated"); v != "yes" {
				return fmt.Errorf("replica has %v", v)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestStartRedisConcurrentPortsDistinct(t *testing.T) {
	const n = 6
	servers := make([]*RedisServer, n)
	var wg sync.WaitGroup
	for i := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			servers[i] = StartRedis(t)
		}()
	}
	wg.Wait()
	seen := map[int]bool{}
	for _, s := range servers {
		if s == nil {
			t.Fatal("a StartRedis failed")
		}
		if seen[s.Port] {
			t.Fatalf("port %d handed out twice", s.Port)
		}
		seen[s.Port] = true
	}
}

func TestSharedCluster(t *testing.T) {
	start := time.Now()
	c := SharedCluster(t)
	t.Logf("SharedCluster ready in %v", time.Since(start))
	if c2 := SharedCluster(t); c2 != c {
		t.Fatal("SharedCluster started a second cluster")
	}
	if len(c.Masters) != 3 || len(c.Replicas) != 3 || len(c.Addrs) != 6 {
		t.Fatalf("topology: %d masters, %d replicas, %d addrs", len(c.Masters), len(c.Replicas), len(c.Addrs))
	}
	for _, a := range c.Addrs {
		info, err := redisString(a, "CLUSTER", "INFO")
		if err != nil {
			t.Fatal(err)
		}
		if infoField(info, "cluster_state") != "ok" || infoField(info, "cluster_slots_assigned") != "16384" ||
			infoField(info, "cluster_known_nodes") != "6" || infoField(info, "cluster_size") != "3" {
			t.Fatalf("%s:\n%s", a, info)
		}
	}
	// A key goes to the master owning its slot; the others redirect.
	slot, _ := mustDo(t, c.Addrs[0], "CLUSTER", "KEYSLOT", "lockx:testenv").(int64)
	for i, m := range c.Masters {
		lo, hi := slotRange(i)
		_, err := redisDo(m.Addr, "SET", "lockx:testenv", "1")
		owns := int(slot) >= lo && int(slot) <= hi
		if owns && err != nil {
			t.Fatalf("owner %s refused SET: %v", m.Addr, err)
		}
		if !owns && (err == nil || !strings.HasPrefix(err.Error(), "MOVED")) {
			t.Fatalf("non-owner %s: err = %v, want MOVED", m.Addr, err)
		}
	}
	for i, r := range c.Replicas {
		info, _ := redisString(r.Addr, "INFO", "replication")
		if infoField(info, "master_port") != strconv.Itoa(c.Masters[i].Port) {
			t.Fatalf("replica %d follows port %s, want %d", i, infoField(info, "master_port"), c.Masters[i].Port)
		}
	}
}

func TestSharedSentinel(t *testing.T) {
	start := time.Now()
	s := SharedSentinel(t)
	t.Logf("SharedSentinel ready in %v", time.Since(start))
	if s2 := SharedSentinel(t); s2 != s {
		t.Fatal("SharedSentinel started a second setup")
	}
	if s.MasterName != "mymaster" || len(s.SentinelAddrs) != 3 || len(s.Sentinels) != 3 || len(s.Replicas) != 2 {
		t.Fatalf("unexpected setup %+v", s)
	}
	for _, a := range s.SentinelAddrs {
		m, err := sentinelMaster(a, s.MasterName)
		if err != nil || m != s.Master.Addr {
			t.Fatalf("sentinel %s names master %q (%v), want %s", a, m, err, s.Master.Addr)
		}
		cfg := pairs(mustDo(t, a, "SENTINEL", "MASTER", s.MasterName))
		if cfg["quorum"] != "2" || cfg["down-after-milliseconds"] != "1000" || cfg["failover-timeout"] != "3000" {
			t.Fatalf("sentinel %s config: %v", a, cfg)
		}
	}
	if got := s.MasterAddr(t); got != s.Master.Addr {
		t.Fatalf("MasterAddr = %s, want %s", got, s.Master.Addr)
	}
}

func TestSentinelFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a private Sentinel setup and waits for a failover")
	}
	s := StartSentinel(t)
	var replicas []string
	for _, r := range s.Replicas {
		replicas = append(replicas, r.Addr)
	}
	start := time.Now()
	s.Master.Kill()
	err := waitUntil(time.Now().Add(20*time.Second), "failover", func() error {
		for _, a := range s.SentinelAddrs {
			m, err := sentinelMaster(a, s.MasterName)
			if err != nil {
				return err
			}
			if !slices.Contains(replicas, m) {
				return fmt.Errorf("sentinel %s still names %s (flags %s)", a, m, sentinelFlags(a, s.MasterName))
			}
		}
		info, err := redisString(s.MasterAddr(t), "INFO", "replication")
		if err != nil {
			return err
		}
		if role := infoField(info, "role"); role != "master" {
			return fmt.Errorf("promoted replica has role %s", role)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("failover to %s took %v", s.MasterAddr(t), time.Since(start))
}

// TestServersDieWithBinary checks that a panicking test binary leaves no
// redis-server behind: it runs this package's binary with a test that
// starts a server and panics.
func TestServersDieWithBinary(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperPanic$", "-test.v")
	cmd.Env = append(os.Environ(), "LOCKX_TESTENV_HELPER=panic")
	out, _ := cmd.CombinedOutput()
	var addr string
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if a, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "HELPER-ADDR="); ok {
			addr = a
		}
	}
	if addr == "" {
		t.Fatalf("helper did not start a server:\n%s", out)
	}
	err := waitUntil(time.Now().Add(5*time.Second), "orphan to die", func() error {
		if answers(addr) {
			return fmt.Errorf("%s still answers", addr)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestHelperPanic(t *testing.T) {
	if os.Getenv("LOCKX_TESTENV_HELPER") != "panic" {
		t.Skip("helper for TestServersDieWithBinary")
	}
	s := StartRedis(t)
	fmt.Printf("HELPER-ADDR=%s\n", s.Addr)
	panic("helper panics with a server running")
}

func TestServices(t *testing.T) {
	if a := RedisAddr(t); a == "" {
		t.Fatal("empty RedisAddr")
	}
	if u := PostgresURL(t); !strings.Contains(u, "5432") && os.Getenv("LOCKX_TEST_POSTGRES_URL") == "" {
		t.Fatalf("PostgresURL = %q", u)
	}
	if d := MySQLDSN(t); d == "" {
		t.Fatal("empty MySQLDSN")
	}
}

func TestUnreachableServiceSkipsOutsideCI(t *testing.T) {
	t.Setenv("CI", "")
	t.Setenv("LOCKX_TEST_REDIS_ADDR", "127.0.0.1:1")
	t.Setenv("LOCKX_TEST_POSTGRES_URL", "postgres://u@127.0.0.1:1/x")
	t.Setenv("LOCKX_TEST_MYSQL_DSN", "root@tcp(127.0.0.1:1)/x")
	for name, f := range map[string]func(testing.TB) string{
		"redis": RedisAddr, "postgres": PostgresURL, "mysql": MySQLDSN,
	} {
		var sub *testing.T
		t.Run(name, func(t *testing.T) {
			sub = t
			f(t)
			t.Error("returned for an unreachable service")
		})
		if !sub.Skipped() {
			t.Fatalf("%s: not skipped", name)
		}
	}
}

func TestDSNAddresses(t *testing.T) {
	for _, c := range []struct{ dsn, network, addr string }{
		{defaultPostgresURL, "tcp", "127.0.0.1:5432"},
		{"postgresql://u:p@db.local/x", "tcp", "db.local:5432"},
		{"postgres://u@[::1]:5433/x", "tcp", "[::1]:5433"},
		{"host=/var/run/postgresql port=5433 user=postgres", "unix", "/var/run/postgresql/.s.PGSQL.5433"},
		{"postgres:///test?host=/tmp", "unix", "/tmp/.s.PGSQL.5432"},
	} {
		if n, a := postgresAddr(c.dsn); n != c.network || a != c.addr {
			t.Errorf("postgresAddr(%q) = %s %s, want %s %s", c.dsn, n, a, c.network, c.addr)
		}
	}
	for _, c := range []struct{ dsn, network, addr string }{
		{defaultMySQLDSN, "tcp", "127.0.0.1:3306"},
		{"u:p@tcp(db:3307)/x?parseTime=true", "tcp", "db:3307"},
		{"u@tcp(db)/x", "tcp", "db:3306"},
		{"root@unix(/run/mysqld/mysqld.sock)/test", "unix", "/run/mysqld/mysqld.sock"},
	} {
		if n, a := mysqlAddr(c.dsn); n != c.network || a != c.addr {
			t.Errorf("mysqlAddr(%q) = %s %s, want %s %s", c.dsn, n, a, c.network, c.addr)
		}
	}
}

var _ = Role("testenv-sleeper", func(args []string) error {
	Say("hello %s", args[0])
	select {} // until killed
})

var _ = Role("testenv-exit", func(args []string) error {
	Say("bye")
	return nil
})

// TestChildKilled: a role runs in a copy of the binary, talks back, and dies
// of SIGKILL; a role that returns exits with status 0.
func TestChildKilled(t *testing.T) {
	c := StartChild(t, "testenv-sleeper", "world")
	if got := c.Expect(t, "hello", 30*time.Second); got != "world" {
		t.Fatalf("child said hello %q, want world", got)
	}
	c.Kill(t)
	e := StartChild(t, "testenv-exit")
	e.Expect(t, "bye", 30*time.Second)
	if err := e.Wait(t, 30*time.Second); err != nil {
		t.Fatalf("exit role: %v", err)
	}
}

// TestMariaDBKillRestart: a private MariaDB survives SIGKILL and restart
// with its committed data.
func TestMariaDBKillRestart(t *testing.T) {
	m := StartMariaDB(t)
	pid := m.Pid
	if !mariaGreets(m.Addr) {
		t.Fatalf("no MariaDB handshake on %s", m.Addr)
	}
	m.Kill()
	if mariaGreets(m.Addr) {
		t.Fatalf("MariaDB still answers on %s after Kill", m.Addr)
	}
	m.Restart(t)
	if m.Pid == pid || !mariaGreets(m.Addr) {
		t.Fatalf("MariaDB not back on %s after Restart (pid %d, was %d)", m.Addr, m.Pid, pid)
	}
}
