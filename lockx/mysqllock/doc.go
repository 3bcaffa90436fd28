// Package mysqllock is lockx's MySQL/MariaDB backend, over database/sql
// and github.com/go-sql-driver/mysql. It has two modes:
//
//   - New: session locks (GET_LOCK / RELEASE_LOCK / IS_FREE_LOCK) on a few
//     pinned connections, fencing tokens from a durable fence table, leases
//     kept by the Backend, loss detection by health check.
//   - NewTable: a lease table, one InnoDB row per key with owner, token and
//     expires_at, renewed by the Client's watchdog (the common MySQL table
//     lock, made correct: owner checks, tokens, renewal, fair queue).
//
// Both implement driver.Backend and driver.Notifier and pass lockxtest; New
// also implements driver.LossNotifier.
//
//	db, _ := sql.Open("mysql", "app@tcp(db:3306)/app?interpolateParams=true")
//	locks := lockx.New(mysqllock.New(db)) // or mysqllock.NewTable(db)
//	defer locks.Close()                   // before db.Close
//
//	lock, err := locks.Acquire(ctx, "order:42")
//	...
//	defer lock.Release(ctx)
//	write(ctx, lock.Token()) // UPDATE … WHERE fence <= ?token
//
// interpolateParams=true is recommended: without it the driver prepares
// every statement, which doubles the round trips (and halves throughput).
//
// # Which mode
//
// Use New (session locks) when the application talks to MySQL/MariaDB
// directly or through a proxy that pins a client to one server session for
// the connection's life (HAProxy/TCP, MySQL Router, MaxScale's readwrite
// split with session state tracking): a crashed process frees its locks at
// once (its sessions end), hot-key handoffs are the fastest (a release
// is RELEASE_LOCK, not a write), and waiting costs no writes.
//
// Use NewTable when session state does not survive: ProxySQL with
// multiplexing, cloud "serverless" proxies and poolers that hand each
// statement to any backend session (GET_LOCK would be taken on one session
// and released or checked on another), or Galera/Group Replication
// clusters where GET_LOCK is local to one node. Every operation is a single
// statement on any pooled connection and no connection is pinned; the price
// is that a crashed holder keeps its lock until its lease runs out (keep
// leases short and let the watchdog renew them), and every grant and
// release is an InnoDB write.
//
// # Session mode: how a lock is held
//
// A key maps to a lock name: the table prefix and the hex SHA-256 of the
// key, cut to GET_LOCK's 64 characters (≥ 176 bits of hash, so collisions,
// which would only cost false contention, do not occur). The name is taken
// with GET_LOCK(name, 0) on one of WithSessions (default 4) pinned
// connections, chosen by hash; many locks share a session. GET_LOCK is
// reentrant per session, so the Backend's memory records which (key, owner)
// holds each name and refuses other owners of this process without a round
// trip: two owners never share one session's lock.
//
// The grant is one statement, REPLACE INTO <prefix>fence … SELECT … WHERE
// CASE WHEN <no fair waiter ahead> THEN GET_LOCK(name, 0) END: only when
// GET_LOCK succeeds is the name's row replaced, and the row's
// AUTO_INCREMENT column draws the fencing token in the same statement and
// transaction. The row (name, key, owner, token, expires, connection id)
// lets any process check an owner, see a holder's lease (Result.TTL of a
// refusal) or force-release a lock; a row is valid only while
// IS_USED_LOCK(name) is its connection. Tokens: InnoDB's AUTO_INCREMENT is
// durable (MariaDB ≥ 10.2.4, MySQL ≥ 8.0 persist it; for older servers the
// sweeper never deletes the row of the highest token, so the counter
// resumes above it); it is global to all keys, so in particular increasing
// per key. A token is returned only after the statement committed.
//
// Statements on holder sessions never run under the caller's context: the
// driver closes a connection whose context is cancelled mid-statement,
// which would free every lock on it. They run under WithStatementTimeout
// (default 5 s) instead; a session that times out is closed and its locks
// reported lost.
//
// # Session mode: leases and loss
//
// GET_LOCK has no TTL. The lease given to Acquire (WithLease, or the
// watchdog's) lives in the Backend's memory and the row: when it passes
// without Extend, the Backend releases the lock (RELEASE_LOCK) and wakes
// waiters; TTL reports the remaining lease. A holder process that dies
// frees its locks at once; one that hangs keeps them until its sessions are
// killed — fencing tokens cover that case.
//
// Extend runs on the holder's session, so it doubles as a health check;
// a health loop (WithHealthInterval, default 1 s) pings sessions that were
// idle. A dead session (KILL, server restart, network cut, statement
// timeout) is closed and forgotten: every lock on it is dropped from the
// bookkeeping, its NotifyLoss callbacks run (so the Client fires Lost
// within about one health interval, not at the next renewal), the next
// Extend returns driver.ErrNotHeld, and waiters of this process are woken. The slot pins a
// new session on next use.
//
// The server's wait_timeout (default 8 hours) closes a session idle that
// long, and a GET_LOCK with it. The health pings keep a holder session
// busy, so keep WithHealthInterval below wait_timeout; a session that timed
// out anyway is found dead at the next ping and its locks reported lost
// (TestWaitTimeoutLoss: wait_timeout 1 s, pings every 3 s, Lost at the
// ping). A force-release by another process (Release with
// the holder's owner) deletes the row; the holder lets go of the named lock
// at its next Extend (ErrNotHeld), so until then other owners stay refused.
//
// # Waiting and fairness
//
// Waiters hold no connection. Releases through the waiters' own Backend
// wake them at once: a plain release wakes the longest-registered waiter
// (which passes the wake-up on if it leaves without using it), a fair
// release, a loss or an expiry wakes all. Releases elsewhere — by other
// processes, or by another Backend of this process (share one Backend, as
// one Client does) — are seen by polling: while anything waits, a Backend
// checks all awaited names in one query (IS_FREE_LOCK, or the lease rows)
// every WithPollInterval (default 100 ms) — wake-up latency from elsewhere
// is at most that interval, at one small query per interval per Backend
// with waiters, however many wait.
//
// Fair waiters (lockx.Fair) queue in <prefix>queue (a MEMORY table: queues
// do not need to survive a restart), across processes, in arrival order
// (AUTO_INCREMENT seq). Only the head may take the lock, and plain
// acquisitions yield to live fair waiters: both conditions are part of the
// grant statement. Crashed waiters drop out after their queue TTL. Limits:
// a fair release wakes every waiter of its Backend (not only the head,
// whose owner the Backend does not know without a query); waiters
// elsewhere learn of it by polling.
//
// # Lease-table mode
//
// <prefix>lease holds one row per key ever locked (name PK, key, owner,
// token, expires). Acquire is one INSERT … ON DUPLICATE KEY UPDATE that
// grants when the row is free or expired (or already the owner's: an
// idempotent re-grant keeps the token), honours the fair queue, bumps the
// row's token on a new grant and reports it through LAST_INSERT_ID; a
// refusal changes no row and writes no redo. Release frees the row
// (owner-checked); rows are never deleted, so tokens increase per key for
// the table's life, and the table grows with the number of distinct keys
// (about 400 bytes a row). Extend is an owner-checked UPDATE of expires;
// if the row's lease has passed or another owner holds it, ErrNotHeld. Time
// is the server's clock (NOW(6)) throughout.
//
// # Schema, rights, identifiers
//
// Tables are created on first use, or by Migrate at deploy time (then use
// WithoutAutoMigrate): <prefix>fence (InnoDB), <prefix>queue (MEMORY),
// <prefix>lease (InnoDB). Creating needs CREATE; using needs SELECT,
// INSERT, UPDATE, DELETE on them. Identifiers are backquoted and the prefix
// is restricted to [A-Za-z0-9_]; every value is a bind parameter. With
// statement-based binary logging, statements that call GET_LOCK are
// flagged unsafe: run binlog_format=ROW or MIXED.
//
// # Connection budget
//
// A session-mode Backend pins at most WithSessions connections (default 4,
// opened on first use), however many locks are held or awaited, plus
// short-lived pooled connections for polling, force-release and TTL of
// locks held elsewhere. Throughput of grants scales with the sessions (one
// statement at a time per session). A table-mode Backend pins none; each
// operation borrows a pooled connection for one statement. Set
// db.SetMaxOpenConns above WithSessions plus the application's own needs.
//
// # Numbers
//
// go test -run '^$' -bench . -benchtime 2s -count 3 ./lockx/mysqllock/ on
// MariaDB 10.11 (local, innodb_flush_log_at_trx_commit=1, 2 shared cores),
// medians, beside the common naive table lock (INSERT … ON DUPLICATE KEY
// UPDATE expire_time = IF(expired, new, old); DELETE to release; no owner
// check, token, renewal or waiting — waiters retry every millisecond):
//
//	                              naive table   session (4)   session (16)   lease table
//	uncontended pairs/s (16 g.)        6,480     1,990 0.31×    3,280 0.51×    3,420 0.53×
//	hot-key grants/s (8 clients)         460       580 1.25×            –       270 0.58×
//
// The naive lock is fastest uncontended because it does less: no token,
// no owner, no queue check; session mode is bounded by its pinned sessions
// (one statement at a time each) and one fsync per grant for the durable
// token. On a hot key session mode wins: a release is RELEASE_LOCK (no
// write) and waiters are woken instead of polling. The lease table pays an
// InnoDB write on both grant and release, serialized on the key's row.
package mysqllock
