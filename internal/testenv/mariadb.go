package testenv

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// MariaDB is one private mariadbd started by testenv, for tests that crash
// or restart the server: the machine's MariaDB is shared by every test
// binary and must never be restarted. Addr, Port and Dir never change; Pid
// changes on Restart.
type MariaDB struct {
	// Addr is "127.0.0.1:Port".
	Addr string
	// Port is the TCP port, chosen by testenv in 7000-7899.
	Port int
	// Dir holds the data directory (Dir/data) and the server's log
	// (Dir/error.log).
	Dir string
	// Pid is the process id of the server.
	Pid int

	mu    sync.Mutex
	cmd   *exec.Cmd
	done  <-chan struct{}
	freed bool
}

// mariaStartTimeout allows for InnoDB crash recovery on a loaded machine.
const mariaStartTimeout = 60 * time.Second

var (
	mariaLookup    sync.Once
	mariadbdPath   string
	mariaInstall   string
	mariaLookupErr error

	mariaTemplate struct {
		once sync.Once
		dir  string
		err  error
	}
)

// StartMariaDB starts a private mariadbd for the calling test, in a fresh
// t.TempDir() on a free port in 7000-7899, with a root account without a
// password and a database "test", and stops it (by pid) at t.Cleanup.
// The data directory is copied from one mariadb-install-db run per test
// binary (so it needs testenv.Main). InnoDB keeps its default durability
// (a commit is on disk), so Kill and Restart lose no committed row. If
// mariadbd or mariadb-install-db is missing the test fails under CI=true
// and is skipped otherwise.
func StartMariaDB(t testing.TB) *MariaDB {
	t.Helper()
	mariaLookup.Do(func() {
		if mariadbdPath, mariaLookupErr = lookPath("mariadbd", "mysqld"); mariaLookupErr == nil {
			mariaInstall, mariaLookupErr = lookPath("mariadb-install-db", "mysql_install_db")
		}
	})
	if mariaLookupErr != nil {
		unavailable(t, "MariaDB cannot be started (%v); install it (Debian: apt-get install mariadb-server) or run scripts/ensure-services.sh", mariaLookupErr)
	}
	requireMain(t)
	mariaTemplate.once.Do(func() {
		var dir string
		if dir, mariaTemplate.err = sharedDir("mariadb-template"); mariaTemplate.err != nil {
			return
		}
		args := []string{"--no-defaults", "--datadir=" + filepath.Join(dir, "data"),
			"--auth-root-authentication-method=normal", "--skip-name-resolve"}
		if u, err := user.Current(); err == nil {
			args = append(args, "--user="+u.Username)
		}
		if out, err := exec.Command(mariaInstall, args...).CombinedOutput(); err != nil {
			mariaTemplate.err = fmt.Errorf("%s: %v\n%s", mariaInstall, err, out)
			return
		}
		mariaTemplate.dir = dir
	})
	if mariaTemplate.err != nil {
		t.Fatalf("testenv: installing MariaDB's system tables: %v", mariaTemplate.err)
	}
	dir := t.TempDir()
	if out, err := exec.Command("cp", "-a", filepath.Join(mariaTemplate.dir, "data"), dir).CombinedOutput(); err != nil {
		t.Fatalf("testenv: copying MariaDB's data directory: %v\n%s", err, out)
	}
	var lastErr error
	for try := 0; try < 10; try++ {
		port, err := reservePort(false)
		if err != nil {
			t.Fatalf("testenv: %v", err)
		}
		m := &MariaDB{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Port: port, Dir: dir}
		m.mu.Lock()
		err = m.startLocked()
		m.mu.Unlock()
		if err == nil {
			t.Cleanup(m.retire)
			return m
		}
		releasePort(port)
		if !errors.Is(err, errPortTaken) {
			t.Fatalf("testenv: %v", err)
		}
		lastErr = err
	}
	t.Fatalf("testenv: no free port for MariaDB in %d-%d: %v", portMin, portMax, lastErr)
	return nil
}

func lookPath(names ...string) (string, error) {
	var err error
	for _, n := range names {
		var p string
		if p, err = exec.LookPath(n); err == nil {
			return p, nil
		}
	}
	return "", err
}

// DSN is a go-sql-driver/mysql DSN for database db as root, with params
// (e.g. "wait_timeout=2") appended.
func (m *MariaDB) DSN(db string, params ...string) string {
	dsn := "root@tcp(" + m.Addr + ")/" + db
	if len(params) > 0 {
		dsn += "?" + strings.Join(params, "&")
	}
	return dsn
}

// Kill crashes the server: SIGKILL to its pid, returning once it has been
// reaped. Restart brings it back on the same port and data.
func (m *MariaDB) Kill() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stopLocked(syscall.SIGKILL)
}

// Restart starts the server again (stopping it first if it runs) on the
// same port and data directory and waits until it accepts connections; a
// killed server runs InnoDB's crash recovery first.
func (m *MariaDB) Restart(tb testing.TB) {
	tb.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.freed {
		tb.Fatalf("testenv: Restart of MariaDB %s after its test ended", m.Addr)
	}
	if err := restartLocked(m.stopLocked, m.startLocked); err != nil {
		tb.Fatalf("testenv: restarting MariaDB on %s: %v", m.Addr, err)
	}
}

func (m *MariaDB) retire() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stopLocked(syscall.SIGTERM)
	if !m.freed {
		m.freed = true
		releasePort(m.Port)
	}
}

func (m *MariaDB) stopLocked(sig syscall.Signal) {
	if m.cmd == nil {
		return
	}
	stopProcess(m.cmd, m.done, sig)
	m.cmd = nil
}

func (m *MariaDB) logPath() string { return filepath.Join(m.Dir, "error.log") }

func (m *MariaDB) startLocked() error {
	args := []string{"--no-defaults", "--datadir=" + filepath.Join(m.Dir, "data"),
		"--port=" + strconv.Itoa(m.Port), "--bind-address=127.0.0.1",
		"--socket=" + filepath.Join(m.Dir, "mysqld.sock"), "--pid-file=" + filepath.Join(m.Dir, "mysqld.pid"),
		"--log-error=" + m.logPath(), "--skip-name-resolve", "--skip-log-bin",
		"--innodb-buffer-pool-size=16M", "--max-connections=500"}
	if u, err := user.Current(); err == nil {
		args = append(args, "--user="+u.Username)
	}
	cmd := exec.Command(mariadbdPath, args...)
	cmd.Dir = m.Dir
	done, err := startProcess(cmd)
	if err != nil {
		return fmt.Errorf("starting mariadbd: %w", err)
	}
	m.cmd, m.done, m.Pid = cmd, done, cmd.Process.Pid
	deadline := time.Now().Add(mariaStartTimeout)
	for {
		select {
		case <-done:
			m.cmd = nil
			log := tail(m.logPath())
			if strings.Contains(log, "Address already in use") {
				return errPortTaken
			}
			return fmt.Errorf("mariadbd on port %d exited during start-up (%v); %s:\n%s", m.Port, cmd.ProcessState, m.logPath(), log)
		default:
		}
		if mariaGreets(m.Addr) {
			return nil
		}
		if time.Now().After(deadline) {
			m.stopLocked(syscall.SIGKILL)
			return fmt.Errorf("mariadbd on port %d did not accept connections within %v; %s:\n%s", m.Port, mariaStartTimeout, m.logPath(), tail(m.logPath()))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// mariaGreets reports whether a MariaDB server sends its handshake on addr.
func mariaGreets(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	b := make([]byte, 128)
	n, _ := io.ReadAtLeast(bufio.NewReader(c), b, 16)
	return strings.Contains(string(b[:n]), "MariaDB")
}
