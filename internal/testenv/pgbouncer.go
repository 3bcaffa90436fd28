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

	proc
	logMu  sync.Mutex
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
	b := &PgBouncer{}
	err = onFreePort("pgbouncer", 1, false, func(ports []int) error {
		b.Port = ports[0]
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(b.Port))
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
`, host, port, b.Port, filepath.Join(dir, "users.txt"), poolMode)
		for name, body := range map[string]string{"pgbouncer.ini": ini, "users.txt": fmt.Sprintf("%q \"\"\n", pgUser)} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				return err
			}
		}
		args := []string{filepath.Join(dir, "pgbouncer.ini")}
		if os.Geteuid() == 0 {
			args = append([]string{"-u", unprivilegedUser()}, args...)
		}
		b.init("pgbouncer", addr, ports, &b.Pid, "", func() error {
			cmd := exec.Command(pgbouncerPath, args...)
			cmd.Stderr = writerFunc(func(q []byte) (int, error) {
				b.logMu.Lock()
				defer b.logMu.Unlock()
				if b.stderr.Len() < 64<<10 {
					b.stderr.Write(q)
				}
				return len(q), nil
			})
			if err := b.launchLocked(cmd); err != nil {
				return err
			}
			return b.awaitLocked(10*time.Second, 20*time.Millisecond, func() error {
				if !answers(addr) {
					return fmt.Errorf("no answer; its log:\n%s", b.log())
				}
				return nil
			}, func(*os.ProcessState) error {
				if strings.Contains(b.log(), "Address already in use") {
					return errPortTaken
				}
				return fmt.Errorf("pgbouncer exited at start; its log:\n%s", b.log())
			})
		})
		return b.first()
	})
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(b.retire)
	v := *u
	v.Host = net.JoinHostPort("127.0.0.1", strconv.Itoa(b.Port))
	b.URL = v.String()
	return b
}

func (b *PgBouncer) log() string {
	b.logMu.Lock()
	defer b.logMu.Unlock()
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
