package faults

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/lockx-go/lockx/internal/testenv"
)

// mysqlWaitTimeout is the server's wait_timeout (seconds) for holder A's
// sessions where a silent holder must lose its session locks: MariaDB's
// own way to end an idle session, as idle_session_timeout is
// PostgreSQL's (the default is 8 hours).
const mysqlWaitTimeout = 2

// mysqlDSN is dsn pointed at addr (if not empty) with extra parameters
// (server variables such as wait_timeout are set on connect).
func mysqlDSN(t *testing.T, dsn, addr string, params map[string]string) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if addr != "" {
		cfg.Net, cfg.Addr = "tcp", addr
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.InterpolateParams = true
	for k, v := range params {
		cfg.Params[k] = v
	}
	return cfg.FormatDSN()
}

// mysqlServer is the server a MySQL scenario runs on: the machine's shared
// MariaDB, or a private one (testenv.StartMariaDB) where it is restarted.
func (r *run) mysqlServer(private bool) (dsn, addr string) {
	r.t.Helper()
	if private {
		r.maria = testenv.StartMariaDB(r.t)
		return r.maria.DSN("test"), r.maria.Addr
	}
	dsn = testenv.MySQLDSN(r.t)
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil || cfg.Net != "tcp" {
		r.t.Skipf("MySQL DSN %q is not TCP: no proxy possible", dsn)
	}
	return dsn, cfg.Addr
}

// mysqlSetup returns a scenario's setup: both holders on the given
// backend (mysql or mysqltable), A through a Proxy (so its sessions can be
// found and cut), with aParams added to A's DSN.
func mysqlSetup(backend string, private bool, aParams map[string]string) func(r *run) ([]string, []string) {
	return func(r *run) ([]string, []string) {
		dsn, addr := r.mysqlServer(private)
		r.mysqlAdmin = dsn
		p, err := NewProxy(addr)
		if err != nil {
			r.t.Fatal(err)
		}
		r.proxy = p
		r.t.Cleanup(p.Close)
		a := []string{"-backend=" + backend, "-mysql=" + mysqlDSN(r.t, dsn, p.Addr, aParams)}
		b := []string{"-backend=" + backend, "-mysql=" + mysqlDSN(r.t, dsn, "", nil)}
		return a, b
	}
}

// killSessions ends, on the server, every session holder A opened (those
// whose client address is one of the proxy's upstream connections), as an
// operator's KILL or a server-side timeout would.
func (r *run) killSessions() int {
	r.t.Helper()
	db, err := sql.Open("mysql", r.mysqlAdmin)
	if err != nil {
		r.t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ports := map[string]bool{}
	for _, a := range r.proxy.UpstreamAddrs() {
		if _, port, err := net.SplitHostPort(a); err == nil {
			ports[port] = true
		}
	}
	rows, err := db.QueryContext(ctx, "SELECT ID, HOST FROM information_schema.PROCESSLIST")
	if err != nil {
		r.t.Fatal(err)
	}
	var ids []int64
	for rows.Next() {
		var id int64
		var host string
		if err := rows.Scan(&id, &host); err != nil {
			r.t.Fatal(err)
		}
		if i := strings.LastIndexByte(host, ':'); i >= 0 && ports[host[i+1:]] {
			ids = append(ids, id)
		}
	}
	if err := rows.Err(); err != nil {
		r.t.Fatal(err)
	}
	rows.Close()
	if len(ids) == 0 {
		r.t.Fatal("no session of holder A found in the process list")
	}
	for _, id := range ids {
		if _, err := db.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id)); err != nil {
			r.t.Logf("KILL %d: %v", id, err)
		}
	}
	return len(ids)
}

func blackhole(r *run) {
	r.proxy.SetBlackhole(Upstream, true)
	r.proxy.SetBlackhole(Downstream, true)
}

func unblackhole(r *run) {
	r.proxy.SetBlackhole(Upstream, false)
	r.proxy.SetBlackhole(Downstream, false)
	r.proxy.Reset() // connections that lost bytes are broken for good
}

// mysqlScenarios are the MySQL/MariaDB (lockx/mysqllock) faults, in both
// modes: session locks (GET_LOCK on pinned sessions; the lock lives as
// long as the session) and the lease table (a row with expires_at by the
// server's clock; sessions do not matter).
func mysqlScenarios() []*scenario {
	idle := map[string]string{"wait_timeout": fmt.Sprint(mysqlWaitTimeout)}
	return []*scenario{
		{
			name: "mysql-holder-pause", backend: "MariaDB (session locks)", fault: fmt.Sprintf("holder SIGSTOPped; its sessions run with wait_timeout = %d s", mysqlWaitTimeout),
			handover: yes, lease: 2 * time.Second, bound: 12 * time.Second,
			note:   "GET_LOCK lives as long as its session: the server frees it when it ends the paused holder's idle session",
			setup:  mysqlSetup("mysql", false, idle),
			inject: func(r *run) { r.a.signal(syscall.SIGSTOP) },
			heal:   func(r *run) { r.a.signal(syscall.SIGCONT) },
		},
		{
			name: "mysql-session-killed", backend: "MariaDB (session locks)", fault: "KILL CONNECTION of every session of the holder",
			handover: yes, lease: 2 * time.Second, bound: 10 * time.Second,
			setup:  mysqlSetup("mysql", false, nil),
			inject: func(r *run) { r.killSessions() },
		},
		{
			name: "mysql-blackhole", backend: "MariaDB (session locks)", fault: fmt.Sprintf("network blackhole (both directions, proxy) between the holder and MariaDB; its sessions run with wait_timeout = %d s", mysqlWaitTimeout),
			handover: yes, lease: 2 * time.Second, bound: 12 * time.Second,
			setup:  mysqlSetup("mysql", false, idle),
			inject: blackhole,
			heal:   unblackhole,
		},
		{
			name: "mysql-restart", backend: "MariaDB (session locks)", fault: "a private mariadbd SIGKILLed and restarted during a hold",
			handover: yes, lease: 2 * time.Second, bound: 40 * time.Second, longOnly: true,
			note:   "every session ends with the server, and its locks with them; the fence table's AUTO_INCREMENT survives the crash, so the next token is greater",
			setup:  mysqlSetup("mysql", true, nil),
			inject: func(r *run) { r.maria.Kill(); r.maria.Restart(r.t) },
		},
		{
			name: "mysql-table-holder-pause", backend: "MariaDB (lease table)", fault: "holder SIGSTOPped for longer than its lease",
			handover: yes, byExpiry: true, lease: 2 * time.Second, bound: 10 * time.Second,
			setup:  mysqlSetup("mysqltable", false, nil),
			inject: func(r *run) { r.a.signal(syscall.SIGSTOP) },
			heal:   func(r *run) { r.a.signal(syscall.SIGCONT) },
		},
		{
			name: "mysql-table-session-killed", backend: "MariaDB (lease table)", fault: "KILL CONNECTION of every session of the holder",
			handover: no, lease: 2 * time.Second, bound: 10 * time.Second,
			note:   "a lease-table lock is a row, not a session: the holder's pool reconnects and keeps renewing, and nobody else may get the lock",
			setup:  mysqlSetup("mysqltable", false, nil),
			inject: func(r *run) { r.killSessions() },
		},
		{
			name: "mysql-table-blackhole", backend: "MariaDB (lease table)", fault: "network blackhole (both directions, proxy) between the holder and MariaDB",
			handover: yes, byExpiry: true, lease: 2 * time.Second, bound: 10 * time.Second,
			setup:  mysqlSetup("mysqltable", false, nil),
			inject: blackhole,
			heal:   unblackhole,
		},
		{
			name: "mysql-table-restart", backend: "MariaDB (lease table)", fault: "a private mariadbd SIGKILLed and restarted during a hold",
			handover: maybe, byExpiry: true, lease: 2 * time.Second, bound: 40 * time.Second,
			note:   "the lease row is committed (InnoDB, durable): a restart does not free the lock, its lease still has to run out by the server's clock; if the server is back before the holder's watchdog gives up, the holder keeps it",
			setup:  mysqlSetup("mysqltable", true, nil),
			inject: func(r *run) { r.maria.Kill(); r.maria.Restart(r.t) },
		},
	}
}
