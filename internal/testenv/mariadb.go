package testenv

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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

	proc // Stop, Kill, Restart, Running
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
	var m *MariaDB
	err := onFreePort("mariadbd", 1, false, func(ports []int) error {
		m = &MariaDB{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])), Port: ports[0], Dir: dir}
		m.init("mariadbd", m.Addr, ports, &m.Pid, filepath.Join(dir, "error.log"), m.startLocked)
		return m.first()
	})
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(m.retire)
	return m
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

func (m *MariaDB) startLocked() error {
	args := []string{"--no-defaults", "--datadir=" + filepath.Join(m.Dir, "data"),
		"--port=" + strconv.Itoa(m.Port), "--bind-address=127.0.0.1",
		"--socket=" + filepath.Join(m.Dir, "mysqld.sock"), "--pid-file=" + filepath.Join(m.Dir, "mysqld.pid"),
		"--log-error=" + m.log, "--skip-name-resolve", "--skip-log-bin",
		"--innodb-buffer-pool-size=16M", "--max-connections=500"}
	if u, err := user.Current(); err == nil {
		args = append(args, "--user="+u.Username)
	}
	cmd := exec.Command(mariadbdPath, args...)
	cmd.Dir = m.Dir
	if err := m.launchLocked(cmd); err != nil {
		return err
	}
	return m.awaitLocked(mariaStartTimeout, 50*time.Millisecond, func() error {
		if !mariaGreets(m.Addr) {
			return errors.New("no MariaDB handshake")
		}
		return nil
	}, func(st *os.ProcessState) error {
		log := tail(m.log)
		if strings.Contains(log, "Address already in use") {
			return errPortTaken
		}
		return fmt.Errorf("mariadbd on port %d exited during start-up (%v); %s:\n%s", m.Port, st, m.log, log)
	})
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
