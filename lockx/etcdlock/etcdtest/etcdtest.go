// Package etcdtest starts etcd servers inside the calling process
// (go.etcd.io/etcd/server/v3/embed) for tests and benchmarks of
// lockx/etcdlock: a single node, or several members forming one cluster,
// with members that can be stopped and restarted to inject faults.
//
// Servers listen on 127.0.0.1 only, on ports picked at random from a range
// and probed first, because other test binaries on the same machine use the
// same range.
package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Config says where and how to start a cluster.
type Config struct {
	// Members is the cluster size (default 1).
	Members int
	// PortMin and PortMax bound the loopback ports used (default 7000–7899,
	// the test range).
	PortMin, PortMax int
	// Dir is where the members keep their data; default a new temporary
	// directory removed by Close.
	Dir string
	// Fsync makes the members sync their write-ahead log to disk, as a
	// production server does. Off by default: tests want speed.
	Fsync bool
}

// Member is one etcd server of a Cluster.
type Member struct {
	Name       string
	ClientURL  string
	peerURL    string
	dir        string
	cfgCluster string
	fsync      bool
	mu         sync.Mutex
	etcd       *embed.Etcd
	ports      []int
}

// Cluster is a set of in-process etcd members.
type Cluster struct {
	Members []*Member
	dir     string
	ownDir  bool
}

// Start starts a cluster as cfg says and waits until it has a leader. A
// port taken by another process between the probe and the bind makes it
// try again on other ports (three tries).
func Start(cfg Config) (*Cluster, error) {
	var err error
	for range 3 {
		var c *Cluster
		if c, err = start(cfg); err == nil {
			return c, nil
		}
		if !strings.Contains(err.Error(), "address already in use") {
			return nil, err
		}
	}
	return nil, err
}

func start(cfg Config) (*Cluster, error) {
	if cfg.Members <= 0 {
		cfg.Members = 1
	}
	if cfg.PortMin == 0 {
		cfg.PortMin, cfg.PortMax = 7000, 7899
	}
	c := &Cluster{dir: cfg.Dir}
	if c.dir == "" {
		d, err := os.MkdirTemp("", "etcdtest-")
		if err != nil {
			return nil, err
		}
		c.dir, c.ownDir = d, true
	}
	var initial []string
	for i := 0; i < cfg.Members; i++ {
		ports, err := reserve(2, cfg.PortMin, cfg.PortMax)
		if err != nil {
			c.Close()
			return nil, err
		}
		m := &Member{
			Name:      fmt.Sprintf("m%d", i),
			ClientURL: "http://127.0.0.1:" + strconv.Itoa(ports[0]),
			peerURL:   "http://127.0.0.1:" + strconv.Itoa(ports[1]),
			ports:     ports,
			fsync:     cfg.Fsync,
		}
		m.dir = c.dir + "/" + m.Name
		initial = append(initial, m.Name+"="+m.peerURL)
		c.Members = append(c.Members, m)
	}
	errs := make(chan error, len(c.Members))
	for _, m := range c.Members {
		m.cfgCluster = strings.Join(initial, ",")
		go func(m *Member) { errs <- m.start(embed.ClusterStateFlagNew) }(m)
	}
	var err error
	for range c.Members {
		err = errors.Join(err, <-errs)
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Endpoints returns the client URLs of every member.
func (c *Cluster) Endpoints() []string {
	eps := make([]string, len(c.Members))
	for i, m := range c.Members {
		eps[i] = m.ClientURL
	}
	return eps
}

// Client returns a new client of the whole cluster; the caller closes it.
func (c *Cluster) Client() (*clientv3.Client, error) {
	return NewClient(c.Endpoints()...)
}

// NewClient returns a client of the given endpoints with short timeouts
// suited to tests on loopback.
func NewClient(endpoints ...string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:            endpoints,
		DialTimeout:          5 * time.Second,
		DialKeepAliveTime:    time.Second,
		DialKeepAliveTimeout: time.Second,
		Logger:               zap.NewNop(),
	})
}

// Leader returns the member that leads now, or nil if none does.
func (c *Cluster) Leader() *Member {
	for _, m := range c.Members {
		m.mu.Lock()
		e := m.etcd
		m.mu.Unlock()
		if e != nil && e.Server.Leader() == e.Server.MemberID() {
			return m
		}
	}
	return nil
}

// WaitLeader waits until some running member leads, up to d.
func (c *Cluster) WaitLeader(d time.Duration) (*Member, error) {
	deadline := time.Now().Add(d)
	for {
		if m := c.Leader(); m != nil {
			return m, nil
		}
		if time.Now().After(deadline) {
			return nil, errors.New("etcdtest: no leader")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Close stops every member and removes the data, if Start made the
// directory.
func (c *Cluster) Close() {
	for _, m := range c.Members {
		m.Stop()
	}
	if c.ownDir {
		_ = os.RemoveAll(c.dir)
	}
}

// Stop stops the member (a crash as far as the cluster can tell: it goes
// away without leaving). It is a no-op on a stopped member.
func (m *Member) Stop() {
	m.mu.Lock()
	e := m.etcd
	m.etcd = nil
	m.mu.Unlock()
	if e != nil {
		e.Close()
	}
}

// Restart starts a stopped member again on its ports and data.
func (m *Member) Restart() error {
	return m.start(embed.ClusterStateFlagExisting)
}

// Running reports whether the member runs.
func (m *Member) Running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.etcd != nil
}

func (m *Member) start(state string) error {
	cfg := embed.NewConfig()
	cfg.Name = m.Name
	cfg.Dir = m.dir
	cu, _ := url.Parse(m.ClientURL)
	pu, _ := url.Parse(m.peerURL)
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = m.cfgCluster
	cfg.InitialClusterToken = "lockx-etcdtest"
	cfg.ClusterState = state
	// Short ticks: elections within a second, and etcd's smallest lease
	// (1.5 election timeouts, rounded up to whole seconds) is 1 s.
	cfg.TickMs = 50
	cfg.ElectionMs = 500
	cfg.UnsafeNoFsync = !m.fsync
	cfg.LogLevel = "error"
	cfg.LogOutputs = []string{m.dir + ".log"}
	cfg.ListenMetricsUrls = nil
	if err := os.MkdirAll(m.dir, 0o700); err != nil {
		return err
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("etcdtest: start %s: %w", m.Name, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return fmt.Errorf("etcdtest: %s: %w", m.Name, err)
	case <-time.After(30 * time.Second):
		e.Close()
		return fmt.Errorf("etcdtest: %s not ready after 30s", m.Name)
	}
	m.mu.Lock()
	m.etcd = e
	m.mu.Unlock()
	return nil
}

// Ping checks that a linearizable read through cli succeeds within d.
func Ping(cli *clientv3.Client, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	_, err := cli.Get(ctx, "etcdtest/ping")
	return err
}

var reserved struct {
	sync.Mutex
	used map[int]bool
}

// reserve picks n free ports in [lo, hi]. Ports stay reserved in this
// process for its lifetime; other processes are detected by probing.
func reserve(n, lo, hi int) ([]int, error) {
	reserved.Lock()
	defer reserved.Unlock()
	if reserved.used == nil {
		reserved.used = make(map[int]bool)
	}
	var out []int
	for try := 0; try < 500 && len(out) < n; try++ {
		p := lo + rand.IntN(hi-lo+1)
		if reserved.used[p] || !portFree(p) {
			continue
		}
		reserved.used[p] = true
		out = append(out, p)
	}
	if len(out) < n {
		return nil, fmt.Errorf("etcdtest: no free port in %d-%d", lo, hi)
	}
	return out, nil
}

func portFree(p int) bool {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
		_ = c.Close()
		return false
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}
