package faults

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/internal/testenv"
)

// handover says whether the fault outlasts the lease so that a second
// client must get the lock (yes), must not (no), or may (maybe).
type handover int

const (
	no handover = iota
	yes
	maybe
)

// scenario is one fault. The driver runs, per iteration:
//
//	before; A acquires; A writes; A checks it holds the lock
//	inject                                  (recovery is timed from here)
//	handover: B acquires (within bound); B writes; heal; A writes (its
//	          write decided before the fault: the stale write); releases
//	no:       B's attempt is refused; heal; A writes; A releases; B
//	          acquires, writes, releases
//
// refusedA: A's acquire itself must be refused (WithReplicaAck).
//
// byExpiry says the server can hand the lock over only once A's lease has
// run out by its clock: the fault neither makes it forget the lock
// (restart without persistence, failover) nor ends A's session. There B's
// grant must come no earlier than A's lease could have expired.
type scenario struct {
	name, backend, fault string
	longOnly             bool
	cluster              bool
	handover             handover
	refusedA             bool
	byExpiry             bool
	// brokenA, brokenB break a holder's lock on purpose (the holder's
	// -broken flag): set only by the sensitivity runs.
	brokenA, brokenB string
	lease            time.Duration
	bound            time.Duration
	note             string
	// lostWithin, if set, bounds the time from the fault to holder A's
	// Lost (it is running, so it must notice by itself).
	lostWithin time.Duration
	// setup starts the servers (once per scenario) and returns the holder
	// flags of A and B.
	setup  func(r *run) (a, b []string)
	before func(r *run)
	inject func(r *run)
	heal   func(r *run)
}

// run is the state of one scenario: servers, proxy, holders.
type run struct {
	t       *testing.T
	sc      *scenario
	bins    *binaries
	bin     string // the holders' program: bins.holder unless setup says
	regPool *pgxpool.Pool
	regURL  string
	key     string
	a, b    *holder

	redis    *testenv.RedisServer
	proxy    *Proxy
	sentinel *testenv.Sentinel
	cluster  *testenv.Cluster
	burning  <-chan struct{}        // closed when the CPU burners stop
	nodes    []*testenv.RedisServer // Redlock nodes
	proxies  []*Proxy               // Redlock: A's way to each node
	victim   *testenv.RedisServer   // a master to kill
	zk       *testenv.ZooKeeper     // a ZooKeeper to restart
	maria    *testenv.MariaDB       // a private MariaDB to restart
	// mysqlAdmin is the DSN the test itself uses on the MySQL scenario's
	// server (to KILL holder A's sessions).
	mysqlAdmin string
	standby    *testenv.RedisServer // its replica
	etcd       *testenv.Etcd        // the etcd scenario's cluster
	etcdDown   *testenv.EtcdMember  // a member killed by the fault
}

var seq atomic.Int64

func sigstop(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP %d: %v", pid, err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
}

func sigcont(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatalf("SIGCONT %d: %v", pid, err)
	}
}

// terminate ends the PostgreSQL backends whose application_name is one of
// names (sessions of this test's holder processes only).
func (r *run) terminate(names ...string) int {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var n int
	err := r.regPool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = ANY($1) AND pid <> pg_backend_pid()`, names).Scan(&n)
	if err != nil {
		r.t.Fatal(err)
	}
	return n
}

// pgAddr is the host:port of the PostgreSQL URL u.
func pgAddr(t *testing.T, u string) string {
	t.Helper()
	pu, err := url.Parse(u)
	if err != nil || pu.Host == "" || pu.Query().Get("host") != "" {
		t.Skipf("PostgreSQL URL %q is not host:port (a Unix socket?): no proxy possible", u)
	}
	if pu.Port() == "" {
		return net.JoinHostPort(pu.Hostname(), "5432")
	}
	return pu.Host
}

// pgVia is the PostgreSQL URL u pointed at addr (a Proxy), with extra
// query parameters.
func pgVia(t *testing.T, u, addr string, params ...string) string {
	t.Helper()
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	pu.Host = addr
	q := pu.RawQuery
	for _, p := range params {
		if q != "" {
			q += "&"
		}
		q += p
	}
	pu.RawQuery = q
	return pu.String()
}

func redisArgs(addr string) []string { return []string{"-backend=redis", "-addr=" + addr} }

func scenarios() []*scenario {
	return append([]*scenario{
		{
			name: "holder-pause", backend: "Redis (single)", fault: "holder SIGSTOPped for longer than its lease, resumed after the next holder wrote",
			byExpiry: true, handover: yes, lease: time.Second, bound: 8 * time.Second,
			setup: func(r *run) ([]string, []string) {
				r.redis = testenv.StartRedis(r.t)
				return redisArgs(r.redis.Addr), redisArgs(r.redis.Addr)
			},
			inject: func(r *run) { r.a.signal(syscall.SIGSTOP) },
			heal:   func(r *run) { r.a.signal(syscall.SIGCONT) },
		},
		{
			name: "redis-hang-short", backend: "Redis (single)", fault: "redis-server SIGSTOPped for less than the lease (≈ one client timeout)",
			handover: no, lease: 4 * time.Second, bound: 10 * time.Second,
			setup: func(r *run) ([]string, []string) {
				r.redis = testenv.StartRedis(r.t)
				return redisArgs(r.redis.Addr), redisArgs(r.redis.Addr)
			},
			inject: func(r *run) { sigstop(r.t, r.redis.Pid) },
			heal:   func(r *run) { sigcont(r.t, r.redis.Pid) },
		},
		{
			name: "redis-hang-long", backend: "Redis (single)", fault: "redis-server SIGSTOPped for 2.5 × the lease",
			byExpiry: true, handover: yes, lease: time.Second, bound: 10 * time.Second,
			setup: func(r *run) ([]string, []string) {
				r.redis = testenv.StartRedis(r.t)
				return redisArgs(r.redis.Addr), redisArgs(r.redis.Addr)
			},
			inject: func(r *run) {
				sigstop(r.t, r.redis.Pid)
				time.Sleep(5 * r.sc.lease / 2)
				sigcont(r.t, r.redis.Pid)
			},
		},
		{
			name: "redis-restart", backend: "Redis (single)", fault: "redis-server SIGKILLed and restarted at once, no persistence, during a hold",
			handover: yes, lease: time.Second, bound: 10 * time.Second,
			setup: func(r *run) ([]string, []string) {
				r.redis = testenv.StartRedis(r.t)
				return redisArgs(r.redis.Addr), redisArgs(r.redis.Addr)
			},
			inject: func(r *run) { r.redis.Kill(); r.redis.Restart(r.t) },
		},
		{
			name: "slow-replies", backend: "Redis (single)", fault: "replies to the holder delayed by 3 × the lease (proxy latency, server→client)",
			byExpiry: true, handover: yes, lease: time.Second, bound: 10 * time.Second,
			setup: func(r *run) ([]string, []string) {
				r.redis = testenv.StartRedis(r.t)
				p, err := NewProxy(r.redis.Addr)
				if err != nil {
					r.t.Fatal(err)
				}
				r.proxy = p
				r.t.Cleanup(p.Close)
				return redisArgs(p.Addr), redisArgs(r.redis.Addr)
			},
			inject: func(r *run) { r.proxy.SetLatency(Downstream, 3*r.sc.lease) },
			heal:   func(r *run) { r.proxy.SetLatency(Downstream, 0) },
		},
		{
			name: "lost-renewal-replies", backend: "Redis (single)", fault: "one-way blackhole: the holder's requests (renewals) arrive, no reply comes back",
			byExpiry: true, handover: yes, lease: time.Second, bound: 10 * time.Second,
			setup: func(r *run) ([]string, []string) {
				r.redis = testenv.StartRedis(r.t)
				p, err := NewProxy(r.redis.Addr)
				if err != nil {
					r.t.Fatal(err)
				}
				r.proxy = p
				r.t.Cleanup(p.Close)
				return redisArgs(p.Addr), redisArgs(r.redis.Addr)
			},
			inject: func(r *run) { r.proxy.SetBlackhole(Downstream, true) },
			heal:   func(r *run) { r.proxy.SetBlackhole(Downstream, false) },
		},
		{
			name: "watchdog-starved", backend: "Redis (single)", fault: "for 3 s, busy goroutines on every core (2 per CPU) plus 300 ms of latency on the holder's requests",
			byExpiry: true, handover: maybe, lease: time.Second, bound: 10 * time.Second, longOnly: true,
			note: "either outcome is allowed: the holder keeps the lock or gives it up at its local deadline",
			setup: func(r *run) ([]string, []string) {
				r.redis = testenv.StartRedis(r.t)
				p, err := NewProxy(r.redis.Addr)
				if err != nil {
					r.t.Fatal(err)
				}
				r.proxy = p
				r.t.Cleanup(p.Close)
				return redisArgs(p.Addr), redisArgs(r.redis.Addr)
			},
			inject: func(r *run) {
				r.proxy.SetLatency(Upstream, 300*time.Millisecond)
				r.burning = burn(3 * time.Second)
			},
			heal: func(r *run) {
				<-r.burning
				r.proxy.SetLatency(Upstream, 0)
			},
		},
		{
			name: "pg-session-terminated", backend: "PostgreSQL", fault: "pg_terminate_backend of the holder's lock session",
			handover: yes, lease: 2 * time.Second, bound: 10 * time.Second,
			setup: func(r *run) ([]string, []string) {
				args := []string{"-backend=pg", "-lockpg=" + r.regURL}
				return args, args
			},
			inject: func(r *run) {
				if n := r.terminate(fmt.Sprintf("faults-lock-%d", r.a.cmd.Process.Pid)); n == 0 {
					r.t.Fatal("no lock session of holder A to terminate")
				}
			},
		},
		{
			name: "pg-holder-pause", backend: "PostgreSQL", fault: "holder SIGSTOPped; its lock sessions run with idle_session_timeout = 1.5 s",
			handover: yes, lease: 2 * time.Second, bound: 12 * time.Second,
			setup: func(r *run) ([]string, []string) {
				sep := "?"
				if strings.Contains(r.regURL, "?") {
					sep = "&"
				}
				return []string{"-backend=pg", "-lockpg=" + r.regURL + sep + "idle_session_timeout=1500"},
					[]string{"-backend=pg", "-lockpg=" + r.regURL}
			},
			inject: func(r *run) { r.a.signal(syscall.SIGSTOP) },
			heal:   func(r *run) { r.a.signal(syscall.SIGCONT) },
		},
		{
			name: "pg-restart-emulated", backend: "PostgreSQL", fault: "every session of both holders terminated at once (the server is shared, so it is not restarted)",
			handover: yes, lease: 2 * time.Second, bound: 12 * time.Second,
			setup: func(r *run) ([]string, []string) {
				args := []string{"-backend=pg", "-lockpg=" + r.regURL}
				return args, args
			},
			inject: func(r *run) {
				var names []string
				for _, h := range []*holder{r.a, r.b} {
					pid := h.cmd.Process.Pid
					names = append(names, fmt.Sprintf("faults-lock-%d", pid), fmt.Sprintf("faults-writer-%d", pid))
				}
				r.terminate(names...)
			},
		},
		{
			name: "pg-blackhole", backend: "PostgreSQL", fault: "network blackhole (both directions, proxy) between the holder and PostgreSQL; its lock sessions run with idle_session_timeout = 1.5 s",
			handover: yes, lease: 2 * time.Second, bound: 12 * time.Second, lostWithin: 2 * time.Second,
			note: "the holder must report Lost within 2 s (health interval 250 ms); its abandoned connection's close passes the proxy, idle_session_timeout is the server's own way out",
			setup: func(r *run) ([]string, []string) {
				p, err := NewProxy(pgAddr(r.t, r.regURL))
				if err != nil {
					r.t.Fatal(err)
				}
				r.proxy = p
				r.t.Cleanup(p.Close)
				return []string{"-backend=pg", "-lockpg=" + pgVia(r.t, r.regURL, p.Addr, "idle_session_timeout=1500")},
					[]string{"-backend=pg", "-lockpg=" + r.regURL}
			},
			inject: func(r *run) {
				r.proxy.SetBlackhole(Upstream, true)
				r.proxy.SetBlackhole(Downstream, true)
			},
			heal: func(r *run) {
				r.proxy.SetBlackhole(Upstream, false)
				r.proxy.SetBlackhole(Downstream, false)
				r.proxy.Reset() // connections that lost bytes are broken for good
			},
		},
		{
			name: "sentinel-failover-unreplicated", backend: "Redis Sentinel", fault: "grant not replicated (replicas SIGSTOPped), master SIGKILLed, replica promoted",
			handover: yes, lease: time.Second, bound: 40 * time.Second,
			setup:  sentinelSetup(0),
			before: sentinelBefore,
			inject: sentinelInject,
		},
		{
			name: "sentinel-failover-replica-ack", backend: "Redis Sentinel + WithReplicaAck(1)", fault: "as above, holder A uses WithReplicaAck(1): the unreplicated grant is refused",
			handover: yes, refusedA: true, lease: time.Second, bound: 40 * time.Second,
			setup:  sentinelSetup(1),
			before: sentinelBefore,
			inject: sentinelInject,
		},
		{
			name: "redlock-holder-pause", backend: "Redlock (5 nodes)", fault: "holder SIGSTOPped for longer than its lease",
			byExpiry: true, handover: yes, lease: time.Second, bound: 8 * time.Second,
			setup:  redlockSetup(false),
			inject: func(r *run) { r.a.signal(syscall.SIGSTOP) },
			heal:   func(r *run) { r.a.signal(syscall.SIGCONT) },
		},
		{
			name: "redlock-one-node-killed", backend: "Redlock (5 nodes)", fault: "1 of 5 nodes SIGKILLed during a hold, restarted after",
			handover: no, lease: 2 * time.Second, bound: 10 * time.Second,
			setup:  redlockSetup(false),
			inject: func(r *run) { r.nodes[0].Kill() },
			heal:   func(r *run) { r.nodes[0].Restart(r.t) },
		},
		{
			name: "redlock-majority-loses-key", backend: "Redlock (5 nodes)", fault: "3 of 5 nodes SIGKILLed and restarted at once without persistence (Kleppmann's K2b)",
			handover: yes, lease: 2 * time.Second, bound: 10 * time.Second,
			setup: redlockSetup(false),
			inject: func(r *run) {
				for _, n := range r.nodes[:3] {
					n.Kill()
					n.Restart(r.t)
				}
			},
		},
		{
			name: "redlock-partition", backend: "Redlock (5 nodes)", fault: "the holder cut off (both directions) from 3 of 5 nodes",
			byExpiry: true, handover: yes, lease: time.Second, bound: 10 * time.Second,
			setup: redlockSetup(true),
			inject: func(r *run) {
				for _, p := range r.proxies[:3] {
					p.SetBlackhole(Upstream, true)
					p.SetBlackhole(Downstream, true)
				}
			},
			heal: func(r *run) {
				for _, p := range r.proxies[:3] {
					p.SetBlackhole(Upstream, false)
					p.SetBlackhole(Downstream, false)
				}
			},
		},
		{
			name: "cluster-master-killed", backend: "Redis Cluster", fault: "grant not replicated (the slot's replica SIGSTOPped), the slot's master SIGKILLed, replica promoted after cluster-node-timeout",
			handover: yes, lease: time.Second, bound: 120 * time.Second, longOnly: true, cluster: true,
			note: "recovery includes the replica's election, which took from 8 s to 70 s on this machine",
			setup: func(r *run) ([]string, []string) {
				r.cluster = testenv.StartCluster(r.t)
				c := redis.NewClient(&redis.Options{Addr: r.cluster.Addrs[0]})
				defer c.Close()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				slot, err := c.ClusterKeySlot(ctx, "lockx:{"+r.key+"}").Result()
				if err != nil {
					r.t.Fatal(err)
				}
				i := 2
				switch {
				case slot <= 5460:
					i = 0
				case slot <= 10922:
					i = 1
				}
				r.victim, r.standby = r.cluster.Masters[i], r.cluster.Replicas[i]
				args := []string{"-backend=cluster", "-addr=" + strings.Join(r.cluster.Addrs, ",")}
				return args, args
			},
			before: func(r *run) { sigstop(r.t, r.standby.Pid) },
			inject: func(r *run) {
				r.victim.Kill()
				sigcont(r.t, r.standby.Pid)
				waitRole(r.t, r.standby.Addr, "master", 40*time.Second)
			},
		},
	}, append(append(zkScenarios(), mysqlScenarios()...), etcdScenarios()...)...)
}

// redlockSetup starts 5 independent nodes; with proxied, holder A reaches
// each through its own Proxy.
func redlockSetup(proxied bool) func(r *run) ([]string, []string) {
	return func(r *run) ([]string, []string) {
		var direct, viaProxy []string
		for range 5 {
			n := testenv.StartRedis(r.t)
			r.nodes = append(r.nodes, n)
			direct = append(direct, n.Addr)
			if proxied {
				p, err := NewProxy(n.Addr)
				if err != nil {
					r.t.Fatal(err)
				}
				r.t.Cleanup(p.Close)
				r.proxies = append(r.proxies, p)
				viaProxy = append(viaProxy, p.Addr)
			}
		}
		b := []string{"-backend=quorum", "-addr=" + strings.Join(direct, ",")}
		if !proxied {
			return b, b
		}
		return []string{"-backend=quorum", "-addr=" + strings.Join(viaProxy, ",")}, b
	}
}

func sentinelSetup(ack int) func(r *run) ([]string, []string) {
	return func(r *run) ([]string, []string) {
		r.sentinel = testenv.StartSentinel(r.t)
		base := []string{"-backend=sentinel", "-master=" + r.sentinel.MasterName, "-addr=" + strings.Join(r.sentinel.SentinelAddrs, ",")}
		a := append([]string(nil), base...)
		if ack > 0 {
			a = append(a, fmt.Sprint("-ack=", ack))
		}
		return a, base
	}
}

// sentinelBefore stops the replicas so that the next grant is not replicated.
func sentinelBefore(r *run) {
	for _, s := range r.sentinel.Replicas {
		sigstop(r.t, s.Pid)
	}
}

// sentinelInject kills the master with the unreplicated grant, resumes the
// replicas and waits for the sentinels to promote one.
func sentinelInject(r *run) {
	old := r.sentinel.Master.Addr
	r.sentinel.Master.Kill()
	for _, s := range r.sentinel.Replicas {
		sigcont(r.t, s.Pid)
	}
	deadline := time.Now().Add(30 * time.Second)
	for r.sentinel.MasterAddr(r.t) == old {
		if time.Now().After(deadline) {
			r.t.Fatal("no failover within 30 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitRole waits until the server at addr reports role.
func waitRole(t *testing.T, addr, role string, d time.Duration) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		v, err := c.Do(ctx, "ROLE").Slice()
		cancel()
		if err == nil && len(v) > 0 && v[0] == role {
			return
		}
		if time.Now().After(deadline) {
			info, _ := c.Info(context.Background(), "replication").Result()
			t.Fatalf("%s did not become %s within %v: %v %v\n%s", addr, role, d, v, err, info)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// burn keeps every core busy for d, in the background; the channel is
// closed when the burners have stopped.
func burn(d time.Duration) <-chan struct{} {
	stop := time.Now().Add(d)
	all := make(chan struct{})
	var wg sync.WaitGroup
	for range runtime.NumCPU() * 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := 0
			for time.Now().Before(stop) {
				for i := range 10000 {
					x += i
				}
			}
			_ = x
		}()
	}
	go func() { wg.Wait(); close(all) }()
	return all
}

func TestFault(t *testing.T) {
	start := time.Now()
	bins := newBinaries(t)
	pool, url := registers(t)
	iters := 1
	if long() {
		iters = 5
	}
	for i, sc := range scenarios() {
		t.Run(sc.name, func(t *testing.T) {
			if sc.longOnly && !long() {
				t.Skip("long form only (LOCKX_FAULTS=long, make faults)")
			}
			n := iters
			switch {
			case sc.cluster:
				n = 1 // a Cluster failover takes 10–70 s here
			case sc.backend != "Redis (single)" && sc.backend != "PostgreSQL" && !strings.HasPrefix(sc.backend, "Redlock") && !strings.HasPrefix(sc.backend, "etcd"):
				n = max(1, iters/2) // each run costs a failover
			}
			res := &result{Name: sc.name, Backend: sc.backend, Fault: sc.fault, Order: i, Bound: sc.bound,
				ExpectLoss: sc.handover == yes && !sc.refusedA, Note: sc.note,
				ByExpiry: sc.byExpiry, MustHold: lockMustHold(sc)}
			// An attempt in which A loses its lock before the fault (a
			// renewal late on a loaded machine) proves nothing and is
			// retried, a bounded number of times.
			for attempt := 0; res.Runs < n; attempt++ {
				if attempt == n+3 {
					t.Fatalf("only %d of %d runs got as far as the fault in %d attempts", res.Runs, n, attempt)
				}
				driveOnce(t, sc, bins, pool, url, res)
				if t.Failed() {
					return
				}
			}
			record(res)
			t.Logf("%s: ops %d, stale accepted fenced %d / unfenced %d, fenced illegal %d/%d, unfenced illegal %d/%d, lock-model violations %d, grant after A's lease end %s, recovery %v",
				sc.name, res.Ops, res.StaleFenced, res.StalePlain, res.FencedIllegal, res.Runs, res.PlainIllegal, res.Runs, res.MutexViolations, marginCell(res), res.Recovery)
			// The lock itself: where theory says it must hold.
			for _, p := range lockProblems(sc, res) {
				t.Error(p)
			}
			// Safety: must hold under every fault.
			if res.StaleFenced != 0 || res.FencedIllegal != 0 {
				t.Errorf("fenced register: %d stale writes accepted, %d/%d histories not linearizable", res.StaleFenced, res.FencedIllegal, res.Runs)
			}
			// Sensitivity: where a second holder got the lock while the first
			// still meant to write, the unfenced twin must lose that write
			// and its checker must say so.
			if res.ExpectLoss && (res.StalePlain == 0 || res.PlainIllegal == 0) {
				t.Errorf("sensitivity: unfenced register accepted %d stale writes, %d/%d histories flagged; the fault should make it lose writes", res.StalePlain, res.PlainIllegal, res.Runs)
			}
			if !res.ExpectLoss && sc.handover == no && (res.StalePlain != 0 || res.PlainIllegal != 0) {
				t.Errorf("unfenced register lost writes (%d) without a handover", res.StalePlain)
			}
		})
	}
	t.Logf("fault suite: %v\n%s", time.Since(start).Round(time.Second), table())
	resultsMu.Lock()
	complete := len(results) == len(scenarios())
	resultsMu.Unlock()
	if long() && !t.Failed() && complete { // not from a -run subset
		writeReport(t, bins, time.Since(start))
	}
}

func driveOnce(t *testing.T, sc *scenario, bins *binaries, pool *pgxpool.Pool, url string, res *result) {
	t.Helper()
	// Each iteration is a subtest so its servers and holders are cleaned up
	// before the next starts.
	t.Run(fmt.Sprintf("run%d", res.Runs+1), func(t *testing.T) {
		defer func() {
			if t.Skipped() {
				res.Retries++
			}
		}()
		n := seq.Add(1)
		r := &run{t: t, sc: sc, bins: bins, bin: bins.holder, regPool: pool, regURL: url,
			key: fmt.Sprintf("faults/%s/%d/%d", sc.name, os.Getpid(), n)}
		fenced, plain := r.key+"/fenced", r.key+"/plain"
		newRegister(t, pool, fenced)
		newRegister(t, pool, plain)
		aArgs, bArgs := sc.setup(r)
		common := []string{"-key=" + r.key, "-fenced=" + fenced, "-plain=" + plain, "-regpg=" + url,
			"-lease=" + sc.lease.String()}
		if sc.brokenA != "" {
			aArgs = append(aArgs, "-broken="+sc.brokenA)
		}
		if sc.brokenB != "" {
			bArgs = append(bArgs, "-broken="+sc.brokenB)
		}
		r.a = startHolder(t, r.bin, 1, append(common, aArgs...)...)
		r.b = startHolder(t, r.bin, 2, append(common, bArgs...)...)

		if sc.before != nil {
			sc.before(r)
		}
		wait := 5 * time.Second
		if sc.refusedA {
			wait = 300 * time.Millisecond // keep the replicas' pause short
		}
		a := r.a.acquire(wait)
		if sc.refusedA {
			if a.OK {
				t.Fatalf("A was granted the lock (token %d) although its grant could not be replicated", a.Token)
			}
			t.Logf("A refused as expected: %s", a.Err)
		} else {
			if !a.OK {
				t.Fatalf("A: acquire: %s", a.Err)
			}
			r.a.write()
			if !r.a.check() {
				t.Skip("A lost its lock before the fault (a late renewal on a loaded machine); retrying")
			}
		}
		t0 := Now()
		sc.inject(r)
		// awaitLoss gives A, still believing it holds, until lostWithin after
		// the fault to be told, before it writes and releases: a release
		// ends its hold, and with it the loss watch that would have told it
		// (etcd's opens 100 ms after the grant), so releasing at once would
		// test the harness's speed, not the backend's.
		awaitLoss := func() {
			for sc.lostWithin > 0 && time.Duration(Now()-t0) <= sc.lostWithin {
				if _, ok := r.a.lostAt(); ok {
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		var recovered int64
		var handedAt int64 // when B's grant during the fault returned (0: none)
		switch {
		case sc.refusedA:
			b := r.b.acquire(sc.bound)
			if !b.OK {
				t.Fatalf("B: no lock within %v after the fault: %s", sc.bound, b.Err)
			}
			recovered = b.Ret
			r.b.write()
			r.b.release()
		case sc.handover == yes || sc.handover == maybe:
			wait := sc.bound
			if sc.handover == maybe {
				wait = 3 * sc.lease
			}
			b := r.b.acquire(wait)
			if b.OK {
				res.Handovers++
				recovered, handedAt = b.Ret, b.Ret
				r.b.write()
				if sc.heal != nil {
					sc.heal(r)
				}
				awaitLoss()
				r.a.write() // decided before the fault: stale now
				r.a.release()
				r.b.release()
				break
			}
			if sc.handover == yes {
				t.Fatalf("B: no lock within %v after the fault: %s", wait, b.Err)
			}
			fallthrough
		default:
			if sc.handover == no {
				if b := r.b.acquire(300 * time.Millisecond); b.OK {
					res.Handovers++
					res.SecondGrants++ // a lock-level failure (lockProblems)
					t.Logf("B was granted the lock during a fault shorter than the lease (token %d)", b.Token)
					r.b.release()
				}
			}
			if sc.heal != nil {
				sc.heal(r)
			}
			awaitLoss()
			r.a.write()
			r.a.release()
			b := r.b.acquire(sc.bound)
			if !b.OK {
				t.Fatalf("B: no lock within %v after A released: %s", sc.bound, b.Err)
			}
			recovered = b.Ret
			r.b.write()
			r.b.release()
		}
		awaitLoss() // where A did not act after the fault (refusedA), its report may still be on its way
		lost, ok := r.a.lostAt()
		if ok {
			t.Logf("A told of the loss %v after the fault", time.Duration(lost-t0).Round(time.Millisecond))
		}
		if sc.lostWithin > 0 {
			switch {
			case !ok:
				t.Errorf("A was never told (Lost) that it lost the lock")
			case time.Duration(lost-t0) > sc.lostWithin:
				t.Errorf("A told of the loss %v after the fault, later than %v", time.Duration(lost-t0), sc.lostWithin)
			}
		}
		r.a.quit()
		r.b.quit()

		if handedAt != 0 && sc.byExpiry {
			// By the server's clock A's lease ran at least lease − drift
			// from the call of the last grant or renewal A heard succeed.
			end, ok := leaseEnd(r.a.all(), sc.lease, handedAt)
			if ok {
				margin := time.Duration(handedAt - end)
				if !res.Margined || margin < res.Margin {
					res.Margin, res.Margined = margin, true
				}
				if margin < 0 {
					res.EarlyGrants++ // a lock-level failure (lockProblems)
					t.Logf("B's grant returned %v before A's lease could have expired", -margin)
				}
			}
		}
		evs := append(r.a.all(), r.b.all()...)
		f, p, m := histories(evs)
		res.Runs++
		res.Ops += len(f) + len(p) + len(m)
		res.StaleFenced += staleAccepted(f)
		res.StalePlain += staleAccepted(p)
		if linearizable(RegisterModel, f) != "Ok" {
			res.FencedIllegal++
		}
		if linearizable(RegisterModel, p) != "Ok" {
			res.PlainIllegal++
		}
		if linearizable(MutexModel, m) != "Ok" {
			res.MutexViolations++
		}
		res.Recovery = append(res.Recovery, time.Duration(recovered-t0))
	})
}
