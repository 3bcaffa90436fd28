package testenv

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// etcdStartTimeout allows for a cluster's first election on a loaded
// machine.
const etcdStartTimeout = 30 * time.Second

// etcdHTTP talks to etcd's HTTP gateway, keeping no connection (and so no
// goroutine) open between calls.
var etcdHTTP = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// Etcd is a cluster of real etcd server processes started by StartEtcd.
type Etcd struct {
	Members []*EtcdMember
}

// EtcdMember is one etcd server process of an Etcd cluster. Name, Addr,
// ClientURL and Dir never change; Pid changes on Restart.
type EtcdMember struct {
	// Name is the member's name in the cluster (m0, m1, ...).
	Name string
	// Addr is the client address, "127.0.0.1:port", in 7000-7899.
	Addr string
	// ClientURL is "http://" + Addr, an etcd client endpoint.
	ClientURL string
	// Dir holds the data directory (Dir/data) and the log (Dir/etcd.log).
	Dir string
	// Pid is the process id of the server.
	Pid int

	args []string
	bin  string
	proc // Kill, Restart (waiting until the member is healthy), Running
}

// StartEtcd starts an etcd cluster of n members (n ≥ 1) for the calling
// test, each a process of bin (an etcd server; args after bin's own
// serverArgs, e.g. "server" for a program that runs etcdmain behind a
// subcommand) in its own directory of t.TempDir(), on loopback ports in
// 7000-7899, with 50 ms heartbeats and 500 ms elections (leases of 1 s are
// allowed) and without fsync. It waits until every member reports itself
// healthy (the cluster has a leader) and stops them (by pid) at
// t.Cleanup. A port taken by another process during start-up makes it
// start the whole cluster again on other ports.
func StartEtcd(t testing.TB, n int, bin string, serverArgs ...string) *Etcd {
	t.Helper()
	var lastErr error
	for try := 0; try < 5; try++ {
		e, err := startEtcd(t.TempDir(), n, bin, serverArgs)
		if err == nil {
			t.Cleanup(e.retire)
			return e
		}
		if !errors.Is(err, errPortTaken) {
			t.Fatalf("testenv: %v", err)
		}
		lastErr = err
	}
	t.Fatalf("testenv: no free ports for etcd in %d-%d: %v", portMin, portMax, lastErr)
	return nil
}

func startEtcd(dir string, n int, bin string, serverArgs []string) (*Etcd, error) {
	e := &Etcd{}
	var initial []string
	for i := 0; i < n; i++ {
		var p [2]int
		for j := range p {
			port, err := reservePort(false)
			if err != nil {
				e.retire()
				return nil, err
			}
			p[j] = port
		}
		m := &EtcdMember{Name: fmt.Sprintf("m%d", i), Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(p[0])),
			Dir: filepath.Join(dir, fmt.Sprintf("m%d", i)), bin: bin}
		m.ClientURL = "http://" + m.Addr
		m.init("etcd "+m.Name, m.Addr, p[:], &m.Pid, filepath.Join(m.Dir, "etcd.log"), func() error {
			if err := m.spawnLocked(); err != nil {
				return err
			}
			return m.waitLocked()
		})
		e.Members = append(e.Members, m)
		initial = append(initial, fmt.Sprintf("%s=http://127.0.0.1:%d", m.Name, p[1]))
	}
	for _, m := range e.Members {
		peer := fmt.Sprintf("http://127.0.0.1:%d", m.ports[1])
		m.args = append(append([]string(nil), serverArgs...),
			"--name", m.Name, "--data-dir", filepath.Join(m.Dir, "data"),
			"--listen-client-urls", m.ClientURL, "--advertise-client-urls", m.ClientURL,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-token", "lockx-testenv",
			"--initial-cluster-state", "new", // ignored once the data directory exists (Restart)
			"--heartbeat-interval", "50", "--election-timeout", "500", "--unsafe-no-fsync",
			"--log-level", "error", "--log-outputs", m.log)
		if err := os.MkdirAll(m.Dir, 0o755); err != nil {
			e.retire()
			return nil, err
		}
		m.mu.Lock()
		err := m.spawnLocked()
		m.mu.Unlock()
		if err != nil {
			e.retire()
			return nil, err
		}
	}
	for _, m := range e.Members {
		m.mu.Lock()
		err := m.waitLocked()
		m.mu.Unlock()
		if err != nil {
			e.retire()
			return nil, err
		}
	}
	return e, nil
}

func (e *Etcd) retire() {
	for _, m := range e.Members {
		m.retire()
	}
}

// Endpoints returns every member's client URL.
func (e *Etcd) Endpoints() []string {
	eps := make([]string, len(e.Members))
	for i, m := range e.Members {
		eps[i] = m.ClientURL
	}
	return eps
}

// Leader returns the running member that leads, waiting up to 30 s for an
// election to end.
func (e *Etcd) Leader(tb testing.TB) *EtcdMember {
	tb.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		for _, m := range e.Members {
			var st struct {
				Header struct {
					MemberID string `json:"member_id"`
				} `json:"header"`
				Leader string `json:"leader"`
			}
			if m.Running() && EtcdCall(m.ClientURL, "/v3/maintenance/status", struct{}{}, &st) == nil &&
				st.Leader != "" && st.Leader == st.Header.MemberID {
				return m
			}
		}
	}
	tb.Fatal("testenv: no etcd leader within 30 s")
	return nil
}

// EtcdCall posts req as JSON to etcd's HTTP gateway (path such as
// "/v3/lease/revoke") at the client URL base and decodes the answer into
// resp (if not nil). Keys and values travel base64-encoded, as the gateway
// wants them.
func EtcdCall(base, path string, req, resp any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	r, err := etcdHTTP.Post(base+path, "application/json", strings.NewReader(string(body)))
	if err != nil {
		return err
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return err
	}
	if r.StatusCode != http.StatusOK {
		return fmt.Errorf("etcd %s: %s: %s", path, r.Status, b)
	}
	if resp == nil {
		return nil
	}
	return json.Unmarshal(b, resp)
}

// spawnLocked starts the process without waiting: a new cluster's members
// become healthy only once enough of them run.
func (m *EtcdMember) spawnLocked() error {
	cmd := exec.Command(m.bin, m.args...)
	cmd.Dir = m.Dir
	return m.launchLocked(cmd)
}

// waitLocked waits until the started member reports itself healthy.
func (m *EtcdMember) waitLocked() error {
	return m.awaitLocked(etcdStartTimeout, 50*time.Millisecond, func() error {
		var h struct {
			Health string `json:"health"`
		}
		r, err := etcdHTTP.Get(m.ClientURL + "/health")
		if err != nil {
			return err
		}
		defer r.Body.Close()
		if err := json.NewDecoder(r.Body).Decode(&h); err != nil || h.Health != "true" {
			return fmt.Errorf("health: %q, %v", h.Health, err)
		}
		return nil
	}, func(st *os.ProcessState) error {
		log := tail(m.log)
		if strings.Contains(log, "address already in use") {
			return errPortTaken
		}
		return fmt.Errorf("etcd %s on %s exited during start-up (%v); %s:\n%s", m.Name, m.Addr, st, m.log, log)
	})
}
