package testenv

import (
	"fmt"
	"net"
	"net/url"
	"os"
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

// PgBouncer is a PgBouncer process in front of the machine's PostgreSQL,
// started by StartPgBouncer.
type PgBouncer struct {
	// URL is PostgresURL with the host and port of PgBouncer.
	URL  string
	Port int
	Pid  int

	mu     sync.Mutex
	stderr strings.Builder
}

var (
	pgbouncerPath      string
	pgbouncerLookup    sync.Once
	pgbouncerLookupErr error
)

// StartPgBouncer starts PgBouncer (Debian package pgbouncer) on a free port
// in 7000-7899 with poolMode ("session", "transaction" or "statement"),
// forwarding every database to the PostgreSQL of PostgresURL, from a
// configuration generated in a temporary directory. It is stopped by pid
// at cleanup. A missing pgbouncer binary fails the test under CI=true and
// skips it otherwise. PostgresURL must be a URL (postgres://user@host:port/db).
func StartPgBouncer(t testing.TB, poolMode string) *PgBouncer {
	t.Helper()
	pgbouncerLookup.Do(func() {
		if pgbouncerPath, pgbouncerLookupErr = exec.LookPath("pgbouncer"); pgbouncerLookupErr != nil {
			if _, err := os.Stat("/usr/sbin/pgbouncer"); err == nil {
				pgbouncerPath, pgbouncerLookupErr = "/usr/sbin/pgbouncer", nil
			}
		}
	})
	if pgbouncerLookupErr != nil {
		unavailable(t, "pgbouncer is not installed (%v); install it (Debian: apt-get install pgbouncer) or run scripts/ensure-services.sh", pgbouncerLookupErr)
	}
	u, err := url.Parse(PostgresURL(t))
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Fatalf("testenv: StartPgBouncer needs LOCKX_TEST_POSTGRES_URL as a postgres:// URL (%v)", err)
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		host, port = u.Hostname(), "5432"
	}
	pgUser := u.User.Username()
	if pgUser == "" {
		pgUser = "postgres"
	}
	// A world-readable directory: run as root, PgBouncer drops to another
	// user (-u) before it reads its files.
	dir, err := os.MkdirTemp("", "lockx-pgbouncer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := reservePort(false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { releasePort(p) })
	ini := fmt.Sprintf(`[databases]
* = host=%s port=%s
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = %s
default_pool_size = 10
max_client_conn = 200
ignore_startup_parameters = extra_float_digits
`, host, port, p, filepath.Join(dir, "users.txt"), poolMode)
	for name, body := range map[string]string{"pgbouncer.ini": ini, "users.txt": fmt.Sprintf("%q \"\"\n", pgUser)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{filepath.Join(dir, "pgbouncer.ini")}
	if os.Geteuid() == 0 {
		args = append([]string{"-u", unprivilegedUser()}, args...)
	}
	cmd := exec.Command(pgbouncerPath, args...)
	b := &PgBouncer{Port: p}
	cmd.Stderr = writerFunc(func(q []byte) (int, error) {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.stderr.Len() < 64<<10 {
			b.stderr.Write(q)
		}
		return len(q), nil
	})
	done, err := startProcess(cmd)
	if err != nil {
		t.Fatalf("testenv: starting pgbouncer: %v", err)
	}
	b.Pid = cmd.Process.Pid
	t.Cleanup(func() { stopProcess(cmd, done, syscall.SIGTERM) })
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	for deadline := time.Now().Add(10 * time.Second); !answers(addr); time.Sleep(20 * time.Millisecond) {
		select {
		case <-done:
			t.Fatalf("testenv: pgbouncer exited at start; its log:\n%s", b.log())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("testenv: pgbouncer does not answer on %s after 10 s; its log:\n%s", addr, b.log())
		}
	}
	v := *u
	v.Host = addr
	b.URL = v.String()
	return b
}

func (b *PgBouncer) log() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stderr.String()
}

// unprivilegedUser names the user PgBouncer runs as when the tests run as
// root (it refuses to run as root): postgres if the PostgreSQL package made
// it, else nobody.
func unprivilegedUser() string {
	if _, err := user.Lookup("postgres"); err == nil {
		return "postgres"
	}
	return "nobody"
}
