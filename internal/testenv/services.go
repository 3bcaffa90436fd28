package testenv

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Defaults for the machine's long-running services; each can be replaced
// through its environment variable.
const (
	defaultRedisAddr   = "127.0.0.1:6379"
	defaultPostgresURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	defaultMySQLDSN    = "root@tcp(127.0.0.1:3306)/test"

	startHint = "run scripts/ensure-services.sh (it installs and starts Redis, PostgreSQL and MariaDB)"
)

// InCI reports whether the tests run under CI (CI=true), where a missing
// service is a failure instead of a skip.
func InCI() bool {
	ok, _ := strconv.ParseBool(os.Getenv("CI"))
	return ok
}

// unavailable fails tb under CI=true and skips it otherwise.
func unavailable(tb testing.TB, format string, args ...any) {
	tb.Helper()
	msg := fmt.Sprintf(format, args...)
	if InCI() {
		tb.Fatalf("testenv: %s (CI=true: a missing service is a failure, not a skip)", msg)
	}
	tb.Skipf("testenv: %s", msg)
}

// RedisAddr returns the address of the machine's Redis: 127.0.0.1:6379, or
// $LOCKX_TEST_REDIS_ADDR. It checks that a Redis answers there; if not, the
// test fails under CI=true and is skipped otherwise, with a message saying
// how to start it. Tests share this server: use distinct key prefixes.
func RedisAddr(t testing.TB) string {
	t.Helper()
	addr := envOr("LOCKX_TEST_REDIS_ADDR", defaultRedisAddr)
	if _, err := redisDo(addr, "PING"); err != nil {
		if _, isReply := err.(respError); !isReply { // an error reply (NOAUTH...) still means a Redis is there
			unavailable(t, "Redis is not reachable at %s (%v); %s, or start one with "+
				"`redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save '' --appendonly no`, "+
				"or point LOCKX_TEST_REDIS_ADDR at one", addr, err, startHint)
		}
	}
	return addr
}

// PostgresURL returns a DSN for the local PostgreSQL:
// "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", or
// $LOCKX_TEST_POSTGRES_URL (URL or key=value form). It only checks that the
// server's address accepts connections; if not, the test fails under
// CI=true and is skipped otherwise.
func PostgresURL(t testing.TB) string {
	t.Helper()
	dsn := envOr("LOCKX_TEST_POSTGRES_URL", defaultPostgresURL)
	network, addr := postgresAddr(dsn)
	if err := reachable(network, addr); err != nil {
		unavailable(t, "PostgreSQL is not reachable at %s (%v); %s, or start it with "+
			"`pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start`, "+
			"or point LOCKX_TEST_POSTGRES_URL at one", addr, err, startHint)
	}
	return dsn
}

// MySQLDSN returns a go-sql-driver/mysql DSN for the local MariaDB:
// "root@tcp(127.0.0.1:3306)/test", or $LOCKX_TEST_MYSQL_DSN. It only checks
// that the server's address accepts connections; if not, the test fails
// under CI=true and is skipped otherwise.
func MySQLDSN(t testing.TB) string {
	t.Helper()
	dsn := envOr("LOCKX_TEST_MYSQL_DSN", defaultMySQLDSN)
	network, addr := mysqlAddr(dsn)
	if err := reachable(network, addr); err != nil {
		unavailable(t, "MariaDB/MySQL is not reachable at %s (%v); %s, or start it with "+
			"`start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd`, "+
			"or point LOCKX_TEST_MYSQL_DSN at one", addr, err, startHint)
	}
	return dsn
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func reachable(network, addr string) error {
	c, err := net.DialTimeout(network, addr, 2*time.Second)
	if err != nil {
		return err
	}
	return c.Close()
}

// postgresAddr extracts the server address from a libpq-style DSN, either
// a URL or key=value pairs. A host starting with "/" is a socket directory.
func postgresAddr(dsn string) (network, addr string) {
	host, port := "127.0.0.1", "5432"
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		if u, err := url.Parse(dsn); err == nil {
			if h := u.Hostname(); h != "" {
				host = h
			}
			if p := u.Port(); p != "" {
				port = p
			}
			if h := u.Query().Get("host"); h != "" {
				host = h
			}
		}
	} else {
		for _, f := range strings.Fields(dsn) {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "host":
				host = v
			case "port":
				port = v
			}
		}
	}
	if strings.HasPrefix(host, "/") {
		return "unix", host + "/.s.PGSQL." + port
	}
	return "tcp", net.JoinHostPort(host, port)
}

// mysqlAddr extracts the address from a go-sql-driver DSN
// ("user:pass@tcp(host:port)/db" or "user@unix(/path)/db").
func mysqlAddr(dsn string) (network, addr string) {
	network, addr = "tcp", "127.0.0.1:3306"
	if _, rest, ok := strings.Cut(dsn, "@"); ok {
		if n, a, ok := strings.Cut(rest, "("); ok && !strings.Contains(n, "/") {
			if a, _, ok := strings.Cut(a, ")"); ok && a != "" {
				network, addr = n, a
			}
		}
	}
	if network == "tcp" {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			addr = net.JoinHostPort(addr, "3306")
		}
	}
	return network, addr
}
