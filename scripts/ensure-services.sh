#!/usr/bin/env bash
# ensure-services.sh — make this machine ready for `make test`.
#
# Checks that Redis (127.0.0.1:6379), PostgreSQL (127.0.0.1:5432, user
# postgres, trust) and MariaDB (127.0.0.1:3306, root, empty password) answer
# and that each database server has a database named `test`. What is not
# installed is installed (as root, with apt-get, on Debian); what is
# installed but not running is started. The throwaway redis-server processes
# for Cluster and Sentinel tests, standalone ZooKeeper servers and PgBouncer
# are started by the tests themselves (internal/testenv) and only need
# redis-server, and Debian's zookeeper and pgbouncer packages, installed.
#
# Under CI=true a service that cannot be made ready is an error (exit 1);
# otherwise it is a warning and the tests that need it skip.
#
# A service pointed elsewhere by LOCKX_TEST_REDIS_ADDR, LOCKX_TEST_POSTGRES_URL
# or LOCKX_TEST_MYSQL_DSN is left alone. Idempotent; well under 2 s when
# everything already runs.
set -uo pipefail

case "${CI:-}" in true | TRUE | True | 1) ci=true ;; *) ci=false ;; esac

say() { printf 'ensure-services: %s\n' "$*" >&2; }
problems=()
problem() { problems+=("$*"); }

is_root=false
[ "$(id -u)" = 0 ] && is_root=true
can_apt=false
$is_root && command -v apt-get >/dev/null 2>&1 && [ -f /etc/debian_version ] && can_apt=true

# tcp_open HOST PORT: does something accept connections there?
tcp_open() { timeout 1 bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null; }

# wait_for SECONDS CMD...: poll CMD every 0.2 s until it succeeds.
wait_for() {
	local limit=$(($1 * 5)) i=0
	shift
	until "$@" >/dev/null 2>&1; do
		i=$((i + 1))
		[ "$i" -ge "$limit" ] && return 1
		sleep 0.2
	done
}

# ---------------------------------------------------------------- install

redis_ok() { [ "$(redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null)" = PONG ]; }
pg_ok() { pg_isready -q -h 127.0.0.1 -p 5432; }
maria_ok() { tcp_open 127.0.0.1 3306 && mariadb-admin -h 127.0.0.1 -P 3306 -u root ping >/dev/null 2>&1; }
mariadbd_bin() { for b in /usr/sbin/mariadbd /usr/sbin/mysqld; do [ -x "$b" ] && echo "$b" && return; done; }

manage_redis=true manage_pg=true manage_maria=true
[ -n "${LOCKX_TEST_REDIS_ADDR:-}" ] && manage_redis=false && say "Redis: using LOCKX_TEST_REDIS_ADDR=$LOCKX_TEST_REDIS_ADDR, not managed here"
[ -n "${LOCKX_TEST_POSTGRES_URL:-}" ] && manage_pg=false && say "PostgreSQL: using LOCKX_TEST_POSTGRES_URL, not managed here"
[ -n "${LOCKX_TEST_MYSQL_DSN:-}" ] && manage_maria=false && say "MariaDB: using LOCKX_TEST_MYSQL_DSN, not managed here"

pkgs=()
# redis-server is always needed: the tests start their own instances.
if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
	pkgs+=(redis-server)
fi
if $manage_pg && ! { command -v pg_ctlcluster && command -v pg_isready && command -v psql; } >/dev/null 2>&1; then
	pkgs+=(postgresql)
fi
if $manage_maria && { [ -z "$(mariadbd_bin)" ] || ! command -v mariadb-admin >/dev/null 2>&1; }; then
	pkgs+=(mariadb-server)
fi

# ZooKeeper for lockx/zklock: the tests start their own standalone servers
# (internal/testenv) from Debian's package; java comes with it.
zk_ok() { [ -f "${LOCKX_ZOOKEEPER_JAR:-/usr/share/java/zookeeper.jar}" ] && command -v java >/dev/null 2>&1; }
if ! zk_ok; then
	pkgs+=(zookeeper)
fi

# PgBouncer for pglock's pooler tests: the tests start their own instances
# (internal/testenv) in front of PostgreSQL, from Debian's package.
pgbouncer_ok() { command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ]; }
if ! pgbouncer_ok; then
	pkgs+=(pgbouncer)
fi

# Headless Chromium for the seckill page test (make test runs it).
if [ ! -x /usr/bin/chromium ]; then
	pkgs+=(chromium)
fi

if [ ${#pkgs[@]} -gt 0 ]; then
	if $can_apt; then
		say "installing ${pkgs[*]} (apt-get)"
		export DEBIAN_FRONTEND=noninteractive
		if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${pkgs[@]}"; } >/tmp/ensure-services-apt.log 2>&1; then
			say "apt-get failed; see /tmp/ensure-services-apt.log"
		fi
	else
		say "missing packages: ${pkgs[*]}"
		say "install them as root, e.g.: apt-get update && apt-get install -y redis-server postgresql mariadb-server pgbouncer chromium"
		say "(or run this script as root on Debian, which installs them itself)"
	fi
fi

# ---------------------------------------------------------------- ZooKeeper

if ! zk_ok; then
	problem "ZooKeeper is not installed (Debian: apt-get install zookeeper; or set LOCKX_ZOOKEEPER_JAR and put java on PATH)"
fi

if ! pgbouncer_ok; then
	problem "PgBouncer is not installed (Debian: apt-get install pgbouncer)"
fi

# ---------------------------------------------------------------- Redis

if ! command -v redis-server >/dev/null 2>&1; then
	problem "redis-server is not installed (Debian: apt-get install redis-server)"
elif $manage_redis; then
	if ! redis_ok; then
		say "starting Redis on 127.0.0.1:6379"
		mkdir -p /var/lib/redis /var/log/redis
		if ! redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log ||
			! wait_for 10 redis_ok; then
			problem "Redis did not answer on 127.0.0.1:6379 (see /var/log/redis/ci.log)"
		fi
	fi
fi

# ---------------------------------------------------------------- PostgreSQL

psql_pg() { psql -X -w -h 127.0.0.1 -p 5432 -U postgres -d postgres -v ON_ERROR_STOP=1 -tA "$@"; }

# pg_trust_loopback: a fresh Debian install asks for passwords over TCP; the
# tests connect as postgres without one, so trust loopback connections.
pg_trust_loopback() {
	local hba
	hba=$(runuser -u postgres -- psql -X -tA -c 'SHOW hba_file' 2>/dev/null) || return 1
	[ -f "$hba" ] || return 1
	grep -Eq '^host[[:space:]]+all[[:space:]]+all[[:space:]]+127\.0\.0\.1/32[[:space:]]+trust' "$hba" && return 1
	say "PostgreSQL: trusting loopback connections in $hba"
	{
		printf 'host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust\n'
		cat "$hba"
	} >"$hba.new" && cat "$hba.new" >"$hba" && rm -f "$hba.new"
	runuser -u postgres -- psql -X -tA -c 'SELECT pg_reload_conf()' >/dev/null
	sleep 0.2
}

if $manage_pg; then
	if ! command -v pg_isready >/dev/null 2>&1; then
		problem "PostgreSQL is not installed (Debian: apt-get install postgresql)"
	else
		if ! pg_ok; then
			if [ -d /etc/postgresql ] && [ -n "$(ls /etc/postgresql 2>/dev/null)" ] && $is_root; then
				say "starting PostgreSQL"
				# shellcheck disable=SC2046
				if pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start; then
					wait_for 30 pg_ok
				fi
			fi
		fi
		if ! pg_ok; then
			problem "PostgreSQL does not answer on 127.0.0.1:5432 (start it: pg_ctlcluster --skip-systemctl-redirect \$(ls /etc/postgresql) main start)"
		else
			if ! psql_pg -c 'SELECT 1' >/dev/null 2>&1 && $is_root; then
				pg_trust_loopback
			fi
			if ! has=$(psql_pg -c "SELECT 1 FROM pg_database WHERE datname = 'test'" 2>&1); then
				problem "PostgreSQL: cannot connect as postgres without a password over 127.0.0.1: $has"
			elif [ "$has" != 1 ]; then
				say "PostgreSQL: creating database test"
				psql_pg -c 'CREATE DATABASE test' >/dev/null || problem "PostgreSQL: could not create database test"
			fi
		fi
	fi
fi

# ---------------------------------------------------------------- MariaDB

maria_root() { mariadb -h 127.0.0.1 -P 3306 -u root "$@"; }

if $manage_maria; then
	bin=$(mariadbd_bin)
	if [ -z "$bin" ]; then
		problem "MariaDB is not installed (Debian: apt-get install mariadb-server)"
	else
		if ! maria_ok && $is_root; then
			say "starting MariaDB"
			if id mysql >/dev/null 2>&1; then
				install -d -o mysql -g mysql /run/mysqld
			else
				mkdir -p /run/mysqld
			fi
			if start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd; then
				wait_for 30 maria_ok
			fi
		fi
		if ! maria_ok; then
			problem "MariaDB does not answer on 127.0.0.1:3306 (start it: start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd)"
		else
			if ! maria_root -e 'SELECT 1' >/dev/null 2>&1 && $is_root && mariadb -u root -e 'SELECT 1' >/dev/null 2>&1; then
				# A fresh install lets root in only through the socket.
				say "MariaDB: allowing root with an empty password over 127.0.0.1"
				mariadb -u root -e "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY '';
					GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
					ALTER USER 'root'@'localhost' IDENTIFIED VIA unix_socket OR mysql_native_password USING PASSWORD('');"
			fi
			if ! out=$(maria_root -e 'CREATE DATABASE IF NOT EXISTS test' 2>&1); then
				problem "MariaDB: cannot create database test as root over 127.0.0.1: $out"
			fi
		fi
	fi
fi

# ---------------------------------------------------------------- verdict

if [ ${#problems[@]} -eq 0 ]; then
	say "ok: redis-server and ZooKeeper installed; Redis, PostgreSQL and MariaDB ready"
	exit 0
fi
for p in "${problems[@]}"; do say "$p"; done
if $ci; then
	say "CI=true: missing services are failures"
	exit 1
fi
say "warning: tests that need these services will be skipped (under CI=true they fail)"
exit 0
