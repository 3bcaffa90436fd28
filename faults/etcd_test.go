package faults

import (
	"strings"
	"syscall"
	"time"

	"github.com/lockx-go/lockx/internal/testenv"
)

// etcdPrefix is etcdlock's default key prefix, under which the holders'
// entries live.
const etcdPrefix = "lockx/"

// etcdSetup returns an etcd scenario's setup: a cluster of n real etcd
// processes (testenv.StartEtcd, from the faults/etcd program), both
// holders running that program with -backend=etcd on every member, holder
// A through a Proxy if proxied (one member only).
func etcdSetup(n int, proxied bool) func(r *run) ([]string, []string) {
	return func(r *run) ([]string, []string) {
		r.bin = r.bins.etcdProgram(r.t)
		r.etcd = testenv.StartEtcd(r.t, n, r.bin, "server")
		b := []string{"-backend=etcd", "-addr=" + strings.Join(r.etcd.Endpoints(), ",")}
		if !proxied {
			return b, b
		}
		p, err := NewProxy(r.etcd.Members[0].Addr)
		if err != nil {
			r.t.Fatal(err)
		}
		r.proxy = p
		r.t.Cleanup(p.Close)
		return []string{"-backend=etcd", "-addr=http://" + p.Addr}, b
	}
}

// revokeHolders revokes, as an operator with etcdctl would, the lease of
// every lock holder entry (<dir>h/<owner>) in the cluster: holder A's,
// since B has not asked yet. It returns how many it revoked.
func (r *run) revokeHolders() int {
	r.t.Helper()
	url := r.etcd.Members[0].ClientURL
	var got struct {
		Kvs []struct {
			Key   []byte `json:"key"`
			Lease string `json:"lease"`
		} `json:"kvs"`
	}
	req := map[string][]byte{"key": []byte(etcdPrefix), "range_end": prefixEnd(etcdPrefix)}
	if err := testenv.EtcdCall(url, "/v3/kv/range", req, &got); err != nil {
		r.t.Fatal(err)
	}
	n := 0
	for _, kv := range got.Kvs {
		if !strings.Contains(string(kv.Key), "/h/") || kv.Lease == "" || kv.Lease == "0" {
			continue
		}
		if err := testenv.EtcdCall(url, "/v3/lease/revoke", map[string]string{"ID": kv.Lease}, nil); err != nil {
			r.t.Fatal(err)
		}
		n++
	}
	if n == 0 {
		r.t.Fatal("no holder entry of A with a lease to revoke")
	}
	return n
}

// prefixEnd is the end of etcd's range of keys starting with p.
func prefixEnd(p string) []byte {
	b := []byte(p)
	b[len(b)-1]++
	return b
}

// etcdScenarios are the etcd (lockx/etcdlock) faults. Each run has a
// cluster of its own; leases are whole seconds on etcd, 2 s here (4 s where
// a leader is killed, so that the election and the client's move to
// another member fit inside it).
func etcdScenarios() []*scenario {
	return []*scenario{
		{
			name: "etcd-holder-pause", backend: "etcd (1 member)", fault: "holder SIGSTOPped for longer than its lease, resumed after the next holder wrote",
			handover: yes, byExpiry: true, lease: 2 * time.Second, bound: 10 * time.Second,
			note:   "the entry's etcd lease runs out by the server's clock, etcd deletes the entry, and the next waiter's watch on it fires",
			setup:  etcdSetup(1, false),
			inject: func(r *run) { r.a.signal(syscall.SIGSTOP) },
			heal:   func(r *run) { r.a.signal(syscall.SIGCONT) },
		},
		{
			name: "etcd-lease-revoked", backend: "etcd (1 member)", fault: "the holder's etcd lease revoked on the server (an operator's etcdctl lease revoke)",
			handover: yes, lease: 2 * time.Second, bound: 10 * time.Second, lostWithin: 2 * time.Second,
			note:   "the holder must report Lost within 2 s: its loss watch sees the entry deleted with the lease, long before a renewal would find the lease gone",
			setup:  etcdSetup(1, false),
			inject: func(r *run) { r.revokeHolders() },
		},
		{
			name: "etcd-blackhole", backend: "etcd (1 member)", fault: "network blackhole (both directions, proxy) between the holder and etcd",
			handover: yes, byExpiry: true, lease: 2 * time.Second, bound: 10 * time.Second,
			setup:  etcdSetup(1, true),
			inject: blackhole,
			heal:   unblackhole,
		},
		{
			name: "etcd-leader-killed", backend: "etcd (3 members)", fault: "the leader SIGKILLed during a hold (a new one elected), restarted after",
			handover: no, lease: 4 * time.Second, bound: 10 * time.Second,
			note:  "leases live in the replicated state, and a new leader extends them: the holder's renewals move to another member and nobody else may get the lock",
			setup: etcdSetup(3, false),
			inject: func(r *run) {
				r.etcdDown = r.etcd.Leader(r.t)
				r.etcdDown.Kill()
				r.etcd.Leader(r.t) // a new one
			},
			heal: func(r *run) { r.etcdDown.Restart(r.t) },
		},
		{
			name: "etcd-restart", backend: "etcd (1 member)", fault: "the etcd server SIGKILLed and restarted during a hold (data directory kept)",
			handover: maybe, byExpiry: true, lease: 2 * time.Second, bound: 30 * time.Second,
			note:   "the entry and its lease are on disk, so a restart does not free the lock: it is freed only when the lease runs out by the server's clock (a restarted server counts it afresh), or the holder keeps it if the server is back before its watchdog gives up",
			setup:  etcdSetup(1, false),
			inject: func(r *run) { m := r.etcd.Members[0]; m.Kill(); m.Restart(r.t) },
		},
	}
}
