package testenv

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// defaultZooKeeperJar is where Debian's zookeeper package puts the server;
// its manifest names the jars it needs.
const defaultZooKeeperJar = "/usr/share/java/zookeeper.jar"

// zkStartTimeout allows for a JVM starting on a loaded 2-core machine.
const zkStartTimeout = 60 * time.Second

// ZooKeeper is one standalone ZooKeeper server (a JVM) started by testenv,
// with its own data directory and generated zoo.cfg. Addr, Port and Dir
// never change; Pid changes on Restart.
type ZooKeeper struct {
	// Addr is "127.0.0.1:Port".
	Addr string
	// Port is the client port, chosen by testenv in 7000-7899.
	Port int
	// Dir holds zoo.cfg, the data directory (Dir/data) and the JVM's output
	// (Dir/zookeeper.out).
	Dir string
	// Pid is the process id of the server's JVM.
	Pid int

	member bool // part of an ensemble: QuorumPeerMain, ready once serving
	proc        // Stop, Kill, Restart, Running
}

// newZooKeeper is the server on ports (client first; a member's quorum and
// election ports after it) in dir.
func newZooKeeper(dir string, ports []int, member bool) *ZooKeeper {
	z := &ZooKeeper{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])), Port: ports[0], Dir: dir, member: member}
	z.init("ZooKeeper", z.Addr, ports, &z.Pid, filepath.Join(dir, "zookeeper.out"), func() error {
		err := z.startLocked()
		if err == nil && z.member {
			err = z.waitLocked()
		}
		return err
	})
	return z
}

// ZooKeeperConfig is the zoo.cfg testenv writes, before the lines it
// controls (dataDir, clientPort, clientPortAddress). tickTime 100 ms and
// minSessionTimeout 300 ms let tests use short sessions; forceSync=no
// spares the shared machine's disk (data still survives Stop and Restart).
var ZooKeeperConfig = []string{
	"tickTime=100",
	"minSessionTimeout=300",
	"maxSessionTimeout=60000",
	"forceSync=no",
	"maxClientCnxns=0",
	"admin.enableServer=false",
	"4lw.commands.whitelist=ruok,conf,srvr",
}

var (
	sharedZK struct {
		once sync.Once
		z    *ZooKeeper
		err  error
	}
	zkLookup   sync.Once
	javaPath   string
	zkJar      string
	zkLookupEr error
)

// SharedZooKeeper returns the binary's ZooKeeper server, starting it on
// first use (a JVM: a few seconds). Main stops it (required). Tests share
// it: use distinct paths or keys, and do not stop or restart it (use
// StartZooKeeper for that). If java or the zookeeper package is missing
// the test fails under CI=true and is skipped otherwise.
func SharedZooKeeper(t testing.TB) *ZooKeeper {
	t.Helper()
	requireZooKeeper(t)
	requireMain(t)
	z, err := sharedZooKeeper()
	if err != nil {
		t.Fatalf("testenv: starting the shared ZooKeeper: %v", err)
	}
	return z
}

// SharedZooKeeperAddr is SharedZooKeeper for code without a testing.TB,
// such as runnable examples: it returns the shared server's address, or an
// error if it cannot be started (java or the zookeeper package missing,
// no testenv.Main).
func SharedZooKeeperAddr() (string, error) {
	zkLookup.Do(lookupZooKeeper)
	if zkLookupEr != nil {
		return "", fmt.Errorf("testenv: ZooKeeper cannot be started: %w", zkLookupEr)
	}
	shared.mu.Lock()
	ok := shared.main && !shared.stopped
	shared.mu.Unlock()
	if !ok {
		return "", errors.New("testenv: the shared ZooKeeper needs testenv.Main")
	}
	z, err := sharedZooKeeper()
	if err != nil {
		return "", err
	}
	return z.Addr, nil
}

func sharedZooKeeper() (*ZooKeeper, error) {
	sharedZK.once.Do(func() {
		var dir string
		if dir, sharedZK.err = sharedDir("zookeeper"); sharedZK.err != nil {
			return
		}
		sharedZK.z, sharedZK.err = startZooKeeper(dir, nil)
		if sharedZK.err == nil {
			shared.mu.Lock()
			shared.others = append(shared.others, sharedZK.z.retire)
			shared.mu.Unlock()
		}
	})
	return sharedZK.z, sharedZK.err
}

// StartZooKeeper starts a private standalone ZooKeeper for the calling test
// in a fresh t.TempDir(), with ZooKeeperConfig plus extra zoo.cfg lines,
// and stops it (by pid) at t.Cleanup.
func StartZooKeeper(t testing.TB, extra ...string) *ZooKeeper {
	t.Helper()
	requireZooKeeper(t)
	z, err := startZooKeeper(t.TempDir(), extra)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(z.retire)
	return z
}

// requireZooKeeper fails (CI=true) or skips tb when java or the ZooKeeper
// jar ($LOCKX_ZOOKEEPER_JAR, default Debian's) is missing.
func requireZooKeeper(tb testing.TB) {
	tb.Helper()
	zkLookup.Do(lookupZooKeeper)
	if zkLookupEr != nil {
		unavailable(tb, "ZooKeeper cannot be started (%v); install it (Debian: apt-get install zookeeper) or run scripts/ensure-services.sh", zkLookupEr)
	}
}

func lookupZooKeeper() {
	zkJar = envOr("LOCKX_ZOOKEEPER_JAR", defaultZooKeeperJar)
	if javaPath, zkLookupEr = exec.LookPath("java"); zkLookupEr != nil {
		return
	}
	_, zkLookupEr = os.Stat(zkJar)
}

func startZooKeeper(dir string, extra []string) (*ZooKeeper, error) {
	var z *ZooKeeper
	err := onFreePort("ZooKeeper", 1, false, func(ports []int) error {
		z = newZooKeeper(dir, ports, false)
		if err := z.writeConfig(extra); err != nil {
			return err
		}
		return z.first()
	})
	if err != nil {
		return nil, err
	}
	return z, nil
}

func (z *ZooKeeper) writeConfig(extra []string) error {
	lines := append(append(append([]string(nil), ZooKeeperConfig...), extra...),
		"dataDir="+filepath.Join(z.Dir, "data"),
		"clientPort="+strconv.Itoa(z.Port),
		"clientPortAddress=127.0.0.1",
	)
	return os.WriteFile(filepath.Join(z.Dir, "zoo.cfg"), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}

func (z *ZooKeeper) startLocked() error {
	out, err := os.OpenFile(filepath.Join(z.Dir, "zookeeper.out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	main := "org.apache.zookeeper.server.ZooKeeperServerMain"
	if z.member {
		main = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
	}
	cmd := exec.Command(javaPath,
		"-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
		"-Dzookeeper.admin.enableServer=false",
		"-cp", z.Dir+string(os.PathListSeparator)+zkJar,
		main, filepath.Join(z.Dir, "zoo.cfg"))
	cmd.Dir = z.Dir
	cmd.Stdout, cmd.Stderr = out, out
	if err := z.launchLocked(cmd); err != nil {
		return err
	}
	if z.member {
		return nil // serving needs a quorum: see waitServing
	}
	return z.waitLocked()
}

// waitLocked waits until the started server answers as itself.
func (z *ZooKeeper) waitLocked() error {
	dataDir := filepath.Join(z.Dir, "data")
	return z.awaitLocked(zkStartTimeout, 50*time.Millisecond, func() error {
		if z.member {
			if srvr, err := fourLetter(z.Addr, "srvr"); err != nil || !strings.Contains(srvr, "Mode: ") {
				return fmt.Errorf("srvr: %q, %v", srvr, err)
			}
			return nil
		}
		conf, err := fourLetter(z.Addr, "conf")
		if err != nil || !strings.Contains(conf, "clientPort=") {
			return fmt.Errorf("conf: %v", err)
		}
		if !strings.Contains(conf, "dataDir="+dataDir) {
			return errPortTaken // someone else's server answers on our port
		}
		if ok, err := fourLetter(z.Addr, "ruok"); err != nil || ok != "imok" {
			return fmt.Errorf("ruok: %q, %v", ok, err)
		}
		return nil
	}, func(st *os.ProcessState) error {
		if answers(z.Addr) {
			return errPortTaken
		}
		return fmt.Errorf("ZooKeeper on port %d exited during start-up (%v); %s:\n%s", z.Port, st, z.log, tail(z.log))
	})
}

// fourLetter sends a ZooKeeper four-letter command and returns the reply.
func fourLetter(addr, cmd string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(c, cmd); err != nil {
		return "", err
	}
	b, err := io.ReadAll(c)
	return strings.TrimSpace(string(b)), err
}

func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no output: " + err.Error() + ")"
	}
	if len(b) > 2048 {
		b = b[len(b)-2048:]
	}
	return strings.TrimSpace(string(b))
}

// ZooKeeperEnsemble is a replicated ZooKeeper: n servers (QuorumPeerMain)
// on loopback, each with its own data directory and three ports in
// 7000-7899 (client, quorum, election).
type ZooKeeperEnsemble struct {
	Servers []*ZooKeeper
}

// StartZooKeeperEnsemble starts an ensemble of n servers for the calling
// test, waits until every one serves (a leader elected), and stops them
// (by pid) at t.Cleanup. Kill, Stop and Restart work on each server.
func StartZooKeeperEnsemble(t testing.TB, n int) *ZooKeeperEnsemble {
	t.Helper()
	requireZooKeeper(t)
	e := &ZooKeeperEnsemble{}
	t.Cleanup(func() {
		for _, z := range e.Servers {
			z.retire()
		}
	})
	var peers []string
	for i := 0; i < n; i++ {
		ports := make([]int, 3)
		for j := range ports {
			p, err := reservePort(false)
			if err != nil {
				t.Fatalf("testenv: %v", err)
			}
			ports[j] = p
		}
		dir := filepath.Join(t.TempDir(), fmt.Sprintf("zk%d", i+1))
		if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "data", "myid"), []byte(strconv.Itoa(i+1)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		e.Servers = append(e.Servers, newZooKeeper(dir, ports, true))
		peers = append(peers, fmt.Sprintf("server.%d=127.0.0.1:%d:%d", i+1, ports[1], ports[2]))
	}
	for _, z := range e.Servers {
		if err := z.writeConfig(append([]string{"initLimit=50", "syncLimit=20"}, peers...)); err != nil {
			t.Fatal(err)
		}
		z.mu.Lock()
		err := z.startLocked()
		z.mu.Unlock()
		if err != nil {
			t.Fatalf("testenv: starting ZooKeeper ensemble member %s: %v", z.Addr, err)
		}
	}
	for _, z := range e.Servers {
		z.mu.Lock()
		err := z.waitLocked()
		z.mu.Unlock()
		if err != nil {
			t.Fatalf("testenv: ZooKeeper ensemble member %s: %v", z.Addr, err)
		}
	}
	return e
}

// Addrs returns the servers' client addresses.
func (e *ZooKeeperEnsemble) Addrs() []string {
	a := make([]string, len(e.Servers))
	for i, z := range e.Servers {
		a[i] = z.Addr
	}
	return a
}

// Leader returns the server that reports itself leader (srvr), waiting up
// to 30 s for an election to end.
func (e *ZooKeeperEnsemble) Leader(tb testing.TB) *ZooKeeper {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, z := range e.Servers {
			if srvr, err := fourLetter(z.Addr, "srvr"); err == nil && strings.Contains(srvr, "Mode: leader") {
				return z
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	tb.Fatal("testenv: no ZooKeeper leader within 30 s")
	return nil
}
