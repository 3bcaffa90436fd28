package faults

import (
	"syscall"
	"time"

	"github.com/lockx-go/lockx/internal/testenv"
)

// zkSession is the holders' ZooKeeper session timeout: how long the server
// keeps a silent client's session (and so its locks).
const zkSession = time.Second

func zkArgs(addr string) []string {
	return []string{"-backend=zk", "-addr=" + addr, "-zksession=" + zkSession.String()}
}

// zkScenarios are the ZooKeeper (lockx/zklock) faults. The holders share
// the test binary's ZooKeeper, except where the server itself is faulted.
func zkScenarios() []*scenario {
	return []*scenario{
		{
			name: "zk-holder-pause", backend: "ZooKeeper", fault: "holder SIGSTOPped for longer than its session timeout (1 s), resumed after the next holder wrote",
			handover: yes, lease: time.Second, bound: 8 * time.Second,
			note: "the paused holder stops heartbeating, the server expires its session and deletes its node, the next waiter's watch fires",
			setup: func(r *run) ([]string, []string) {
				z := testenv.SharedZooKeeper(r.t)
				return zkArgs(z.Addr), zkArgs(z.Addr)
			},
			inject: func(r *run) { r.a.signal(syscall.SIGSTOP) },
			heal:   func(r *run) { r.a.signal(syscall.SIGCONT) },
		},
		{
			name: "zk-blackhole", backend: "ZooKeeper", fault: "network blackhole (both directions, proxy) between the holder and ZooKeeper; session timeout 1 s",
			handover: yes, lease: time.Second, bound: 8 * time.Second, lostWithin: 2 * time.Second,
			note: "the holder notices the silence after 2/3 of the session timeout and declares its lock lost a quarter of it later, before the server can expire the session and grant the lock to the next waiter",
			setup: func(r *run) ([]string, []string) {
				z := testenv.SharedZooKeeper(r.t)
				p, err := NewProxy(z.Addr)
				if err != nil {
					r.t.Fatal(err)
				}
				r.proxy = p
				r.t.Cleanup(p.Close)
				return zkArgs(p.Addr), zkArgs(z.Addr)
			},
			inject: func(r *run) {
				r.proxy.SetBlackhole(Upstream, true)
				r.proxy.SetBlackhole(Downstream, true)
			},
			heal: func(r *run) {
				r.proxy.SetBlackhole(Upstream, false)
				r.proxy.SetBlackhole(Downstream, false)
				r.proxy.Reset()
			},
		},
		{
			name: "zk-server-restart", backend: "ZooKeeper", fault: "ZooKeeper SIGKILLed and restarted during a hold (data directory kept); session timeout 1 s",
			handover: yes, lease: time.Second, bound: 30 * time.Second,
			note: "the holder declares its lock lost a quarter of the session timeout after the disconnection; sessions survive the restart, so on reconnecting it deletes its own node and the waiter is granted (a greater czxid: the epoch moved on)",
			setup: func(r *run) ([]string, []string) {
				z := testenv.StartZooKeeper(r.t)
				r.zk = z
				return zkArgs(z.Addr), zkArgs(z.Addr)
			},
			inject: func(r *run) { r.zk.Kill(); r.zk.Restart(r.t) },
		},
	}
}
