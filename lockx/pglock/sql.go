package pglock

import (
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Statement names prepared on every holder session.
const (
	stAcquire      = "lockx_acquire"
	stAcquireFair  = "lockx_acquire_fair"
	stAcquireWait  = "lockx_acquire_wait"
	stEnqueue      = "lockx_enqueue"
	stRelease      = "lockx_release"
	stReap         = "lockx_reap"
	stExtend       = "lockx_extend"
	stAcqShared    = "lockx_acquire_shared"
	stRelShared    = "lockx_release_shared"
	stRemoteRel    = "lockx_remote_release"
	stRemoteTTL    = "lockx_remote_ttl"
	stRemoteExtend = "lockx_remote_extend"
	stPing         = "lockx_ping"
	stSweep        = "lockx_sweep"
	stUnlock       = "lockx_unlock"
	stUnlockShared = "lockx_unlock_shared"
	stLost         = "lockx_lost"
	stAcquireMany  = "lockx_acquire_many"
	stReleaseMany  = "lockx_release_many"
	stPublish      = "lockx_publish"
	stReleasePub   = "lockx_release_published"
	stYoung        = "lockx_young"
)

// names are the quoted identifiers of one schema's objects.
type names struct {
	schema string // quoted schema
	fence  string // quoted fence sequence
	held   string // quoted lock table
	epoch  string // quoted fence-guard marker table (fence_guard.go)
	queue  string // quoted fair-queue table
	// pheld, pqueue and pstate are the read/write lock and semaphore
	// tables (see pattern.go).
	pheld, pqueue, pstate string
	// fenceLit is the fence sequence as a string literal for nextval().
	fenceLit string
	// channel is the LISTEN/NOTIFY channel of the schema.
	channel string
}

func newNames(schema string) names {
	fence := pgx.Identifier{schema, "lockx_fence"}.Sanitize()
	return names{
		schema:   pgx.Identifier{schema}.Sanitize(),
		fence:    fence,
		held:     pgx.Identifier{schema, "lockx_held"}.Sanitize(),
		epoch:    pgx.Identifier{schema, "lockx_epoch"}.Sanitize(),
		queue:    pgx.Identifier{schema, "lockx_queue"}.Sanitize(),
		pheld:    pgx.Identifier{schema, "lockx_pattern_held"}.Sanitize(),
		pqueue:   pgx.Identifier{schema, "lockx_pattern_queue"}.Sanitize(),
		pstate:   pgx.Identifier{schema, "lockx_pattern_state"}.Sanitize(),
		fenceLit: "'" + strings.ReplaceAll(fence, "'", "''") + "'",
		channel:  channelName(schema),
	}
}

// channelName is the notification channel of schema: an identifier of at
// most 63 bytes.
func channelName(schema string) string {
	if c := "lockx:" + schema; len(c) <= 63 {
		return c
	}
	return fmt.Sprintf("lockx:%016x", uint64(keyHash("schema", schema)))
}

// expand replaces the placeholders {held}, {queue}, {fence} and the shared
// SQL fragments in q.
func (n names) expand(q string) string {
	q = strings.NewReplacer("{live}", sqlLive, "{head}", sqlHead, "{arrival}", sqlArrival,
		"{nowaiter}", noWaiter("$3::int4", "$4::int4")).Replace(q)
	return strings.NewReplacer(
		"{held}", n.held,
		"{queue}", n.queue,
		"{fence}", "nextval("+n.fenceLit+"::regclass)",
	).Replace(q)
}

// expandPattern replaces {pheld}, {pqueue}, {pstate} and {fence} in q.
func (n names) expandPattern(q string) string {
	return strings.NewReplacer(
		"{pheld}", n.pheld,
		"{pqueue}", n.pqueue,
		"{pstate}", n.pstate,
		"{fence}", "nextval("+n.fenceLit+"::regclass)",
	).Replace(q)
}

// sqlLive is true when the row h still belongs to a session that holds its
// advisory lock: a row left behind by a dead session is not a lock. Only the
// rare cross-process paths pay for reading pg_locks.
const sqlLive = `EXISTS (SELECT 1 FROM pg_catalog.pg_locks l
	WHERE ` + sqlExclusiveAdvisory + ` AND l.pid = h.pid
	AND l.classid::int8 = ((h.hash >> 32) & 4294967295) AND l.objid::int8 = (h.hash & 4294967295))`

// sqlExclusiveAdvisory keeps, of pg_locks l, the granted session-level
// exclusive advisory locks (one bigint key) of this database: pglock's.
const sqlExclusiveAdvisory = `l.locktype = 'advisory' AND l.objsubid = 1 AND l.mode = 'ExclusiveLock' AND l.granted
	AND l.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database())`

// noWaiter is true when no process holds the wait flag (a, b) (see
// waitFlag): the statement takes the flag exclusively and gives it back at
// once, at session level. A transaction-level try (pg_try_advisory_xact_lock)
// would keep the flag until the statement's commit, and on a hot key the
// next holder's release often runs before that commit — the releasing
// backend is preempted by the waiter its unlock wakes — so it found the flag
// taken and sent a NOTIFY that nobody waited for, waking every listening
// process of the schema (about 2 % of the releases of a key handed between
// 16 processes). Held for two function calls, the flag no longer outlives
// the release. AND does not evaluate the unlock when the try fails.
func noWaiter(a, b string) string {
	return "(pg_try_advisory_lock(" + a + ", " + b + ") AND pg_advisory_unlock(" + a + ", " + b + "))"
}

// sqlArrival orders fair waiters: the server's clock in microseconds. It
// costs no sequence value (and no WAL) per queue refresh; waiters that
// arrive within the same microsecond are ordered by owner.
const sqlArrival = `(extract(epoch FROM clock_timestamp()) * 1000000)::int8`

// sqlHead is the owner (hex) at the head of $1's fair queue other than $2,
// appended to a notification so that only the next fair waiter is woken.
const sqlHead = `coalesce(' ' || (SELECT encode(q.owner, 'hex') FROM {queue} q
	WHERE q.hash = $1::int8 AND q.owner <> $2::bytea AND q.expires > clock_timestamp() ORDER BY q.seq, q.owner LIMIT 1), '')`

// grant is shared by both acquire statements: take the advisory lock, draw
// the fence token in the same statement, and record the holder's row
// (overwriting a row left by a dead session: holding the lock proves it is
// gone). Parameters: $1 hash, $2 key, $3 owner, $4 lease in ms.
const sqlGrantTail = `, w AS (
	INSERT INTO {held} AS h (hash, key, owner, token, expires, pid)
	SELECT $1::int8, $2::bytea, $3::bytea, g.token, clock_timestamp() + $4::int8 * interval '1 millisecond', pg_backend_pid()
	FROM g WHERE g.token IS NOT NULL
	ON CONFLICT (hash) DO UPDATE SET key = excluded.key, owner = excluded.owner, token = excluded.token,
		expires = excluded.expires, pid = excluded.pid, acquired = clock_timestamp()
)`

// A refusal's second column is the holder's lease left in ms; its third is
// 1 when the id is held, live, under another key than $2 (a collision,
// ErrKeyCollision): only then is pg_locks read. A row marked released
// (expires 'epoch') is no holder, even if its session holds the id again
// for an owner whose row is not yet written.
const sqlGrantResult = `SELECT g.token, CASE WHEN g.token IS NULL THEN (SELECT greatest(ceil(extract(epoch FROM h.expires - clock_timestamp()) * 1000), 0)::int8
	FROM {held} h WHERE h.hash = $1::int8) END,
	CASE WHEN g.token IS NULL THEN (SELECT ` + sqlCollision + ` FROM {held} h WHERE h.hash = $1::int8 AND h.key <> $2::bytea AND h.expires > clock_timestamp()) END FROM g`

// sqlCollision is 1 when the row h, of another key, is a live lock; the
// CASE keeps pg_locks unread for the same key.
const sqlCollision = `CASE WHEN {live} THEN 1 ELSE 0 END::int8`

// sqlHolderRow writes the holder's row of a grant made without it (a
// deferred publication, see Backend.publish), overwriting the row of an
// earlier holder. $1 hash, $2 key, $3 owner, $4 token, $5 lease left in ms,
// $6 the hold's age in ms (its acquired time).
const sqlHolderRow = `INSERT INTO {held} AS h (hash, key, owner, token, expires, pid, acquired)
	VALUES ($1::int8, $2::bytea, $3::bytea, $4::int8, clock_timestamp() + $5::int8 * interval '1 millisecond', pg_backend_pid(),
		clock_timestamp() - $6::int8 * interval '1 millisecond')
	ON CONFLICT (hash) DO UPDATE SET key = excluded.key, owner = excluded.owner, token = excluded.token,
		expires = excluded.expires, pid = excluded.pid, acquired = excluded.acquired`

// statements returns the prepared statements of a holder session. CASE fixes
// the evaluation order: the queue check before the lock, the lock before the
// token, the unlock before the waiter check.
//
// With deferred, the plain grants (stAcquire, stAcquireWait, stAcquireMany)
// take the lock and draw the token but write no holder row: the Backend
// writes it (stPublish) only once a hold has lasted the publish delay, so a
// short hold — every hold of a hot key — costs no row write at all. The
// release of a published hold (stReleasePub) then marks its row released:
// the session may next hold the key for an owner whose row is not yet
// written, and the old row must not pass for that owner's.
func (n names) statements(deferred bool) map[string]string {
	grantTail := sqlGrantTail
	if deferred {
		// Owner and lease are not used without the row, but keep their
		// types (an unreferenced CTE is never run).
		grantTail = `, w AS (SELECT $3::bytea, $4::int8)`
	}
	manyRows := `, w AS (
	INSERT INTO {held} AS h (hash, key, owner, token, expires, pid)
	SELECT g.hash, g.key, g.owner, g.token, clock_timestamp() + g.lease_ms * interval '1 millisecond', pg_backend_pid()
	FROM g WHERE g.token IS NOT NULL
	ON CONFLICT (hash) DO UPDATE SET key = excluded.key, owner = excluded.owner, token = excluded.token,
		expires = excluded.expires, pid = excluded.pid, acquired = clock_timestamp()
)`
	if deferred {
		manyRows = ""
	}
	m := map[string]string{
		// A plain acquisition yields to live fair waiters.
		stAcquire: `WITH g AS MATERIALIZED (
	SELECT CASE WHEN EXISTS (SELECT 1 FROM {queue} WHERE hash = $1::int8 AND expires > clock_timestamp()) THEN NULL
		WHEN pg_try_advisory_lock($1::int8) THEN {fence} END AS token
)` + grantTail + sqlGrantResult,

		// A waiter's acquisition on a wait session: it queues in
		// PostgreSQL's own lock queue for at most the lock timeout $5 (set
		// for this statement's transaction only), so the release hands the
		// lock over inside the server. It yields to live fair waiters as a
		// plain attempt does (then NULL without error); a timeout is an
		// error (55P03) that leaves nothing held. Once the lock is granted
		// the timeout is lifted, so the row write cannot time out after it.
		stAcquireWait: `WITH g AS MATERIALIZED (
	SELECT CASE WHEN EXISTS (SELECT 1 FROM {queue} WHERE hash = $1::int8 AND expires > clock_timestamp()) THEN NULL
		WHEN set_config('lock_timeout', $5::text, true) IS NULL THEN NULL
		WHEN pg_advisory_lock($1::int8)::text IS NOT NULL AND set_config('lock_timeout', '0', true) IS NOT NULL THEN {fence} END AS token
)` + grantTail + sqlGrantResult,

		// A fair acquisition tries only at the head of the queue; refused
		// with $5 (wait) it joins the queue or refreshes its entry, keeping
		// its place unless the entry had expired. $6 is the queue TTL in ms.
		stAcquireFair: `WITH hd AS MATERIALIZED (
	SELECT owner FROM {queue} WHERE hash = $1::int8 AND expires > clock_timestamp() ORDER BY seq, owner LIMIT 1
), g AS MATERIALIZED (
	SELECT CASE WHEN EXISTS (SELECT 1 FROM hd WHERE owner <> $3::bytea) THEN NULL
		WHEN pg_try_advisory_lock($1::int8) THEN {fence} END AS token
)` + sqlGrantTail + `, dq AS (
	DELETE FROM {queue} WHERE hash = $1::int8 AND (
		(owner = $3::bytea AND EXISTS (SELECT 1 FROM g WHERE token IS NOT NULL))
		OR (owner <> $3::bytea AND expires <= clock_timestamp()))
), iq AS (
	INSERT INTO {queue} AS q (hash, owner, seq, expires)
	SELECT $1::int8, $3::bytea, {arrival}, clock_timestamp() + $6::int8 * interval '1 millisecond'
	FROM g WHERE g.token IS NULL AND $5::bool
	ON CONFLICT (hash, owner) DO UPDATE SET expires = excluded.expires,
		seq = CASE WHEN q.expires <= clock_timestamp() THEN excluded.seq ELSE q.seq END
)` + sqlGrantResult,

		// A fair waiter refused in process (the key is held or being taken
		// by another owner of this Backend) still keeps its place in the
		// shared queue. $1 hash, $2 owner, $3 queue TTL in ms.
		stEnqueue: `INSERT INTO {queue} AS q (hash, owner, seq, expires)
	VALUES ($1::int8, $2::bytea, {arrival}, clock_timestamp() + $3::int8 * interval '1 millisecond')
	ON CONFLICT (hash, owner) DO UPDATE SET expires = excluded.expires,
		seq = CASE WHEN q.expires <= clock_timestamp() THEN excluded.seq ELSE q.seq END`,

		// Release: unlock, and notify only if some process has waiters
		// (holds the wait flag). The row is left as it is: a row whose
		// session no longer holds the advisory lock is no lock (every
		// cross-process reader checks pg_locks), and the next grant of the
		// key overwrites it; not writing it halves the writes per lock. $1 hash, $2 owner, $3/$4 wait flag,
		// $5 channel, $6 payload. Result -1: the lock was not held.
		stRelease: `SELECT CASE WHEN NOT pg_advisory_unlock($1::int8) THEN -1
	WHEN {nowaiter} THEN 0
	ELSE 1 + length(pg_notify($5::text, $6::text || {head})::text) END::int8`,

		// Release of a published hold: stRelease, and its row marked
		// released in the same transaction.
		stReleasePub: `WITH d AS (UPDATE {held} SET expires = 'epoch' WHERE hash = $1::int8 AND owner = $2::bytea AND pid = pg_backend_pid())
SELECT CASE WHEN NOT pg_advisory_unlock($1::int8) THEN -1
	WHEN {nowaiter} THEN 0
	ELSE 1 + length(pg_notify($5::text, $6::text || {head})::text) END::int8`,

		stPublish: sqlHolderRow,
		stYoung:   sqlYoung,

		// Reap an expired lease by the server's clock, or report the ms left
		// if it was extended meanwhile. Parameters as for release.
		stReap: `WITH e AS MATERIALIZED (
	SELECT ceil(extract(epoch FROM expires - now()) * 1000)::int8 AS left_ms
	FROM {held} WHERE hash = $1::int8 AND owner = $2::bytea AND pid = pg_backend_pid()
), d AS (UPDATE {held} SET expires = 'epoch' WHERE hash = $1::int8 AND owner = $2::bytea AND pid = pg_backend_pid() AND expires <= now())
SELECT CASE WHEN (SELECT left_ms FROM e) > 0 THEN (SELECT left_ms FROM e)
	WHEN NOT pg_advisory_unlock($1::int8) THEN -1
	WHEN {nowaiter} THEN 0
	ELSE 0 * length(pg_notify($5::text, $6::text || {head})::text) END::int8`,

		// Extend: a live row of this session gets a new lease. No row means
		// the lease ran out or an operator released the lock. $3 lease ms.
		stExtend: `UPDATE {held} SET expires = clock_timestamp() + $3::int8 * interval '1 millisecond'
	WHERE hash = $1::int8 AND owner = $2::bytea AND pid = pg_backend_pid() AND expires > clock_timestamp()`,

		stAcqShared: `SELECT CASE WHEN pg_try_advisory_lock_shared($1::int8) THEN {fence} END`,

		stRelShared: `SELECT CASE WHEN NOT pg_advisory_unlock_shared($1::int8) THEN -1
	WHEN {nowaiter} THEN 0
	ELSE 1 + length(pg_notify($5::text, $6::text || {head})::text) END::int8`,

		// Release by owner from a Backend that does not hold the lock: an
		// operator's force-unlock, or a fair waiter withdrawing. The holder
		// learns at its next renewal. $1 hash, $2 owner, $3 key, $4 channel,
		// $5 payload. Result: queue entries removed, live rows removed.
		stRemoteRel: `WITH dq AS (DELETE FROM {queue} WHERE hash = $1::int8 AND owner = $2::bytea RETURNING 1),
dh AS (UPDATE {held} h SET expires = 'epoch' WHERE hash = $1::int8 AND owner = $2::bytea AND key = $3::bytea AND expires > clock_timestamp() RETURNING {live} AS live)
SELECT (SELECT count(*) FROM dq)::int8, (SELECT count(*) FROM dh WHERE live)::int8,
	CASE WHEN EXISTS (SELECT 1 FROM dq) OR EXISTS (SELECT 1 FROM dh)
		THEN length(pg_notify($4::text, $5::text || {head})::text) END::int8`,

		stRemoteTTL: `SELECT greatest(ceil(extract(epoch FROM h.expires - clock_timestamp()) * 1000), 1)::int8 FROM {held} h
	WHERE hash = $1::int8 AND owner = $2::bytea AND key = $3::bytea AND expires > clock_timestamp() AND {live}`,

		stRemoteExtend: `UPDATE {held} h SET expires = clock_timestamp() + $4::int8 * interval '1 millisecond'
	WHERE hash = $1::int8 AND owner = $2::bytea AND key = $3::bytea AND expires > clock_timestamp() AND {live}`,

		stPing: `SELECT 1::int8`,

		// Released rows stay (so that the next grant of the key is an
		// in-place update, not an insert and a delete), as do rows of
		// sessions that died and entries of waiters that crashed; they are
		// overwritten or ignored. The sweep bounds the tables to the keys of
		// the last minute or so.
		stSweep: `WITH a AS (DELETE FROM {held} WHERE expires < clock_timestamp() - interval '1 minute')
DELETE FROM {queue} WHERE expires < clock_timestamp() - interval '1 minute'`,

		// The plain acquisitions of one pipeline batch as one statement: one
		// executor start, transaction and commit for all of them. Arrays of
		// hash, key, owner, lease in ms; one row per element, in order.
		// Elements never share a hash (one attempt per hash is in flight per
		// process), so the upsert touches each row once.
		stAcquireMany: `WITH r AS (SELECT * FROM unnest($1::int8[], $2::bytea[], $3::bytea[], $4::int8[]) WITH ORDINALITY AS r(hash, key, owner, lease_ms, i)),
g AS MATERIALIZED (
	SELECT r.*, CASE WHEN EXISTS (SELECT 1 FROM {queue} q WHERE q.hash = r.hash AND q.expires > clock_timestamp()) THEN NULL
		WHEN pg_try_advisory_lock(r.hash) THEN {fence} END AS token
	FROM r ORDER BY r.i
)` + manyRows + `
SELECT g.token, CASE WHEN g.token IS NULL THEN (SELECT greatest(ceil(extract(epoch FROM h.expires - clock_timestamp()) * 1000), 0)::int8
	FROM {held} h WHERE h.hash = g.hash) END,
	CASE WHEN g.token IS NULL THEN (SELECT ` + sqlCollision + ` FROM {held} h WHERE h.hash = g.hash AND h.key <> g.key AND h.expires > clock_timestamp()) END
FROM g ORDER BY g.i`,

		// The plain releases of one pipeline batch as one statement. Arrays
		// of hash, owner and the wait flag's two halves; $5 channel. One row
		// per element, in order: -1 not held, 0 released, 1 released and
		// waiters notified.
		stReleaseMany: `WITH r AS (SELECT * FROM unnest($1::int8[], $2::bytea[], $3::int4[], $4::int4[]) WITH ORDINALITY AS r(hash, owner, w1, w2, i))
SELECT CASE WHEN NOT pg_advisory_unlock(r.hash) THEN -1
	WHEN ` + noWaiter("r.w1", "r.w2") + ` THEN 0
	ELSE 1 + length(pg_notify($5::text, r.hash::text || coalesce(' ' || (SELECT encode(q.owner, 'hex') FROM {queue} q
		WHERE q.hash = r.hash AND q.owner <> r.owner AND q.expires > clock_timestamp() ORDER BY q.seq, q.owner LIMIT 1), ''))::text) END::int8
FROM r ORDER BY r.i`,

		// After a holder session died: its locks are free, so mark their rows
		// released and wake waiting processes. Parameters as for release.
		stLost: `WITH d AS (UPDATE {held} SET expires = 'epoch' WHERE hash = $1::int8 AND owner = $2::bytea AND expires > 'epoch')
SELECT CASE WHEN {nowaiter} THEN 0
	ELSE 1 + length(pg_notify($5::text, $6::text || {head})::text) END::int8`,

		// Undo a grant statement that failed (it may have taken the lock).
		stUnlock:       `SELECT CASE WHEN pg_advisory_unlock($1::int8) THEN 0 ELSE -1 END::int8`,
		stUnlockShared: `SELECT CASE WHEN pg_advisory_unlock_shared($1::int8) THEN 0 ELSE -1 END::int8`,
	}
	if deferred {
		// Without the row, a waiter's acquisition is one plain SELECT:
		// no CTE, no refusal lease or collision column (a wait session
		// refuses only to yield to fair waiters, and a collision is found
		// by the try on the holder session after the slice), and the lock
		// timeout left in place after the grant — it ends with the
		// statement's transaction, and a timeout of nextval after the grant
		// is handled as the slice's end (the grant is given back). $1 hash,
		// $2 the slice.
		m[stAcquireWait] = `SELECT CASE WHEN EXISTS (SELECT 1 FROM {queue} WHERE hash = $1::int8 AND expires > clock_timestamp()) THEN NULL
		WHEN set_config('lock_timeout', $2::text, true) IS NULL THEN NULL
		WHEN pg_advisory_lock($1::int8)::text IS NOT NULL THEN {fence} END, 0::int8, 0::int8`
	}
	for k, v := range m {
		m[k] = n.expand(v)
	}
	return m
}
