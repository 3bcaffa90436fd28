package testenv

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	clusterMasters = 3
	// clusterNodeTimeout is cluster-node-timeout in ms: long enough that a
	// busy 2-core machine running race-enabled tests does not cause false
	// failovers, short enough for fault tests to see a failover.
	clusterNodeTimeout = 5000
	setupTimeout       = 30 * time.Second
)

// Cluster is a Redis Cluster of 3 masters, each with one replica. The
// fields describe the topology as started; a test that fails nodes over
// must ask the cluster for the current one.
type Cluster struct {
	// Addrs holds every node's address, masters first: seeds for a
	// cluster client (go-redis ClusterOptions.Addrs).
	Addrs []string
	// Masters own slots 0-5460, 5461-10922 and 10923-16383 in order.
	Masters []*RedisServer
	// Replicas[i] replicates Masters[i].
	Replicas []*RedisServer
}

func (c *Cluster) servers() []*RedisServer {
	return append(append([]*RedisServer(nil), c.Masters...), c.Replicas...)
}

var sharedCluster struct {
	once sync.Once
	c    *Cluster
	err  error
}

// SharedCluster returns the binary's Redis Cluster, starting it on first
// use: 3 masters and 3 replicas (one per master) on free ports in
// 7000-7899, slots assigned, every node reporting cluster_state:ok and
// knowing the whole topology, every replica's link to its master up. It
// takes about 3 s to start and is stopped by Main (required). Tests share
// it: use distinct keys, and do not stop, kill or fail over its nodes (use
// StartCluster for that).
func SharedCluster(t testing.TB) *Cluster {
	t.Helper()
	requireRedisBinary(t)
	requireMain(t)
	sharedCluster.once.Do(func() {
		sharedCluster.c, sharedCluster.err = startCluster(sharedDir)
		if sharedCluster.err == nil {
			addShared(sharedCluster.c.servers()...)
		}
	})
	if sharedCluster.err != nil {
		t.Fatalf("testenv: starting the shared Redis Cluster: %v", sharedCluster.err)
	}
	return sharedCluster.c
}

// StartCluster starts a private Redis Cluster, like SharedCluster's, for
// the calling test, and stops it at t.Cleanup. Use it for tests that kill
// or restart nodes.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	requireRedisBinary(t)
	c, err := startCluster(func(string) (string, error) { return t.TempDir(), nil })
	if err != nil {
		t.Fatalf("testenv: starting a Redis Cluster: %v", err)
	}
	t.Cleanup(func() { retireAll(c.servers()) })
	return c
}

// startCluster starts and joins the nodes; on error it stops what it
// started.
func startCluster(mkdir func(name string) (string, error)) (c *Cluster, err error) {
	var nodes []*RedisServer
	defer func() {
		if err != nil {
			retireAll(nodes)
		}
	}()
	for i := 0; i < 2*clusterMasters; i++ {
		dir, err := mkdir("cluster" + strconv.Itoa(i))
		if err != nil {
			return nil, err
		}
		s, err := startServer(dir, true, plainArgs([]string{
			"--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(dir, "nodes.conf"),
			"--cluster-node-timeout", strconv.Itoa(clusterNodeTimeout),
			"--cluster-announce-ip", "127.0.0.1",
		}))
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, s)
	}

	ids := make([]string, len(nodes))
	for i, n := range nodes {
		if ids[i], err = redisString(n.Addr, "CLUSTER", "MYID"); err != nil {
			return nil, err
		}
		// Distinct epochs up front, as redis-cli --cluster create does, so
		// no epoch collision has to be resolved later.
		if _, err = redisDo(n.Addr, "CLUSTER", "SET-CONFIG-EPOCH", strconv.Itoa(i+1)); err != nil {
			return nil, err
		}
	}
	for i := 0; i < clusterMasters; i++ {
		lo, hi := slotRange(i)
		args := []string{"CLUSTER", "ADDSLOTS"}
		for s := lo; s <= hi; s++ {
			args = append(args, strconv.Itoa(s))
		}
		if _, err = redisDo(nodes[i].Addr, args...); err != nil {
			return nil, err
		}
	}
	// Each replica first meets only its master and starts replicating it;
	// then every remaining pair meets directly. Nodes thus learn each
	// replica's role in the handshake instead of waiting up to
	// node-timeout/2 for gossip, and a cluster is ready in about 3 s (the
	// floor is Redis's 2 s writable delay for masters after start-up).
	meet := func(a, b *RedisServer) error {
		_, err := redisDo(a.Addr, "CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(b.Port))
		return err
	}
	deadline := time.Now().Add(setupTimeout)
	for i := 0; i < clusterMasters; i++ {
		master, replica := nodes[i], nodes[clusterMasters+i]
		if err = meet(replica, master); err != nil {
			return nil, err
		}
		pair := []*RedisServer{master, replica}
		if err = waitUntil(deadline, "replica meets master", func() error { return clusterMet(pair) }); err != nil {
			return nil, err
		}
		if _, err = redisDo(replica.Addr, "CLUSTER", "REPLICATE", ids[i]); err != nil {
			return nil, err
		}
	}
	for i, a := range nodes {
		for j, b := range nodes[i+1:] {
			if j+i+1 != i+clusterMasters {
				if err = meet(a, b); err != nil {
					return nil, err
				}
			}
		}
	}
	if err = waitUntil(deadline, "cluster ready", func() error { return clusterReady(nodes, ids) }); err != nil {
		return nil, err
	}
	c = &Cluster{Masters: nodes[:clusterMasters], Replicas: nodes[clusterMasters:]}
	for _, n := range nodes {
		c.Addrs = append(c.Addrs, n.Addr)
	}
	return c, nil
}

// slotRange is master i's share of the 16384 slots, as redis-cli splits it.
func slotRange(i int) (lo, hi int) {
	const slots = 16384
	lo = i * slots / clusterMasters
	hi = (i+1)*slots/clusterMasters - 1
	return lo, hi
}

// clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	id, addr, flags, master, link string
}

func clusterNodes(addr string) ([]clusterNode, error) {
	s, err := redisString(addr, "CLUSTER", "NODES")
	if err != nil {
		return nil, err
	}
	var out []clusterNode
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			return nil, fmt.Errorf("malformed CLUSTER NODES line %q", line)
		}
		out = append(out, clusterNode{id: f[0], addr: f[1], flags: f[2], master: f[3], link: f[7]})
	}
	return out, nil
}

func healthy(n clusterNode) error {
	for _, bad := range []string{"fail", "handshake", "noaddr"} {
		for _, flag := range strings.Split(n.flags, ",") {
			if strings.TrimSuffix(flag, "?") == bad {
				return fmt.Errorf("node %s %s is %s", n.id, n.addr, n.flags)
			}
		}
	}
	if n.link != "connected" {
		return fmt.Errorf("node %s %s link %s", n.id, n.addr, n.link)
	}
	return nil
}

// clusterMet: every node knows all the others and talks to them.
func clusterMet(nodes []*RedisServer) error {
	for _, s := range nodes {
		ns, err := clusterNodes(s.Addr)
		if err != nil {
			return err
		}
		if len(ns) != len(nodes) {
			return fmt.Errorf("%s knows %d of %d nodes", s.Addr, len(ns), len(nodes))
		}
		for _, n := range ns {
			if err := healthy(n); err != nil {
				return fmt.Errorf("seen from %s: %v", s.Addr, err)
			}
		}
	}
	return nil
}

// clusterReady: every node reports cluster_state:ok and sees replica i as
// the replica of master i, and every replica's replication link is up.
func clusterReady(nodes []*RedisServer, ids []string) error {
	if err := clusterMet(nodes); err != nil {
		return err
	}
	for _, s := range nodes {
		info, err := redisString(s.Addr, "CLUSTER", "INFO")
		if err != nil {
			return err
		}
		if st := infoField(info, "cluster_state"); st != "ok" {
			return fmt.Errorf("%s: cluster_state:%s", s.Addr, st)
		}
		ns, err := clusterNodes(s.Addr)
		if err != nil {
			return err
		}
		byID := make(map[string]clusterNode, len(ns))
		for _, n := range ns {
			byID[n.id] = n
		}
		for i := 0; i < clusterMasters; i++ {
			r := byID[ids[clusterMasters+i]]
			if !strings.Contains(r.flags, "slave") || r.master != ids[i] {
				return fmt.Errorf("%s does not yet see %s as replica of %s", s.Addr, r.addr, ids[i])
			}
		}
	}
	for _, r := range nodes[clusterMasters:] {
		if err := replicaLinked(r.Addr); err != nil {
			return err
		}
	}
	return nil
}

// replicaLinked checks that the server at addr is a replica whose link to
// its master is up.
func replicaLinked(addr string) error {
	info, err := redisString(addr, "INFO", "replication")
	if err != nil {
		return err
	}
	if role := infoField(info, "role"); role != "slave" {
		return fmt.Errorf("%s: role %s, want replica", addr, role)
	}
	if st := infoField(info, "master_link_status"); st != "up" {
		return fmt.Errorf("%s: master_link_status:%s", addr, st)
	}
	return nil
}

// waitUntil polls cond until it returns nil or the deadline passes.
func waitUntil(deadline time.Time, what string, cond func() error) error {
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out waiting for %s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
