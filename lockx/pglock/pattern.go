package pglock

import (
	"context"
	"encoding/hex"
	"errors"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lockx-go/lockx/lockx"
)

// Semaphores (lockx.SemaphoreBackend) are table-based (read/write locks are
// advisory locks: rw.go): each permit holder is one row of lockx_pattern_held with a lease on the server's clock, and
// waiters are rows of lockx_pattern_queue. Every decision runs in one short
// transaction on a pool connection that first takes a transaction-scoped
// advisory lock on the key's pattern hash, so decisions on one key are
// serialised across every process, and a crashed holder's row simply stops
// counting when its lease ends. Releases send a NOTIFY with the key's hash,
// which Watch on the same key string receives.

// Pattern kinds: a read/write key and a semaphore key of the same name are
// distinct.
const (
	kindRW  = 1
	kindSem = 2
)

// Modes of a held row: read, write, permit.
const (
	rowRead   = 1
	rowWrite  = 2
	rowPermit = 3
)

var (
	_ lockx.RWBackend        = (*Backend)(nil)
	_ lockx.SemaphoreBackend = (*Backend)(nil)
)

// patternLock is the advisory xact-lock key serialising decisions on a
// pattern key: distinct from the plain lock's advisory key of the same name.
func (b *Backend) patternLock(kind int, key string) int64 {
	if kind == kindRW {
		return keyHash(b.cfg.namespace+"\x00rw", key)
	}
	return keyHash(b.cfg.namespace+"\x00sem", key)
}

// patternTx runs fn on one pool connection, creating the schema first if
// it is missing and auto-migration is on. fn sends its statements in
// batches (one round trip each); a batch that starts with sqlBegin opens a
// transaction that a later batch commits, and its first statements take
// the key's decision lock (sqlDecide) and purge expired rows (sqlPurge). A
// connection left inside a transaction by an error is destroyed by the pool
// on release, which rolls the transaction back.
func (b *Backend) patternTx(ctx context.Context, op string, kind int, key string, fn func(c *pgx.Conn, hash, lock int64) error) error {
	if b.cfg.err != nil {
		return b.cfg.err
	}
	if err := ctx.Err(); err != nil {
		return unavailable(op, context.Cause(ctx))
	}
	b.mu.Lock()
	closed := b.closed
	b.mu.Unlock()
	if closed {
		return unavailable(op, errClosed)
	}
	hash, lock := b.hash(key), b.patternLock(kind, key)
	run := func() error {
		conn, err := b.pool.Acquire(ctx)
		if err != nil {
			return err
		}
		defer conn.Release()
		return fn(conn.Conn(), hash, lock)
	}
	err := run()
	if err != nil && isMissingSchema(err) && b.cfg.autoMigrate {
		if merr := Migrate(ctx, b.pool, WithSchema(b.cfg.schema)); merr == nil {
			err = run()
		}
	}
	if err == nil || errors.Is(err, lockx.ErrUpgrade) || errors.Is(err, lockx.ErrNotHeld) {
		return err
	}
	if isMissingSchema(err) {
		return unavailable(op, errors.New("pglock: schema "+b.names.schema+" is missing: run pglock.Migrate: "+err.Error()))
	}
	if ctx.Err() != nil {
		return unavailable(op, context.Cause(ctx))
	}
	return unavailable(op, usageError(err, b.names))
}

// The fixed head of a decision: take the key's decision lock, then drop
// its expired holds and queue entries.
const (
	sqlDecide = `SELECT pg_advisory_xact_lock($1)`
	sqlPurge  = `WITH a AS (DELETE FROM {pheld} WHERE kind = $1 AND hash = $2 AND expires <= clock_timestamp()),
		b AS (DELETE FROM {pqueue} WHERE kind = $1 AND hash = $2 AND expires <= clock_timestamp())
		SELECT 1`
)

// head queues the decision lock and the purge of a key on batch.
func (b *Backend) head(batch *pgx.Batch, kind int, hash, lock int64) {
	batch.Queue(sqlDecide, lock)
	batch.Queue(b.names.expandPattern(sqlPurge), kind, hash)
}

// sqlIdle forgets the key's read epoch once nobody holds or awaits it.
const sqlIdle = `DELETE FROM {pstate} s WHERE s.kind = $1 AND s.hash = $2
	AND NOT EXISTS (SELECT 1 FROM {pheld} h WHERE h.kind = $1 AND h.hash = $2)
	AND NOT EXISTS (SELECT 1 FROM {pqueue} q WHERE q.kind = $1 AND q.hash = $2)`

func (b *Backend) queueTTL(d time.Duration) time.Duration {
	if d <= 0 {
		return lockx.DefaultQueueTTL
	}
	return d
}

// ownSeq is owner's place in the queue, or nil if it is not queued.
const sqlOwnSeq = `(SELECT seq FROM {pqueue} WHERE kind = $1 AND hash = $2 AND owner = $3)`

// extendPattern renews a live hold in one statement: it needs no decision
// lock, since it only moves its own row's lease.
func (b *Backend) extendPattern(ctx context.Context, op string, kind int, key string, owner lockx.Owner, m int, lease time.Duration) error {
	return b.patternTx(ctx, op, kind, key, func(c *pgx.Conn, hash, _ int64) error {
		tag, err := c.Exec(ctx, b.names.expandPattern(`UPDATE {pheld} SET expires = clock_timestamp() + $5 * interval '1 millisecond'
			WHERE kind = $1 AND hash = $2 AND owner = $3 AND mode = $4 AND expires > clock_timestamp()`), kind, hash, []byte(owner), m, ms(lease))
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return lockx.ErrNotHeld
		}
		return nil
	})
}

// releasePattern frees a hold and withdraws its owner from the queue in one
// round trip (one implicit transaction), notifying the waiters that may now
// be granted (patternWake) if anything changed.
func (b *Backend) releasePattern(ctx context.Context, op string, kind int, key string, owner lockx.Owner, m int) error {
	b.refs.forget(hex.EncodeToString([]byte(owner)))
	var held int64
	targets := semWake("(SELECT coalesce(sum(count), 0) FROM d)")
	err := b.patternTx(ctx, op, kind, key, func(c *pgx.Conn, hash, lock int64) error {
		batch := &pgx.Batch{}
		b.head(batch, kind, hash, lock)
		batch.Queue(b.names.expandPattern(`WITH d AS (DELETE FROM {pheld} WHERE kind = $1 AND hash = $2 AND owner = $3 AND mode = $4 RETURNING count),
			q AS (DELETE FROM {pqueue} WHERE kind = $1 AND hash = $2 AND owner = $3 RETURNING 1)
			SELECT (SELECT count(*) FROM d),
				CASE WHEN (EXISTS (SELECT 1 FROM d) OR EXISTS (SELECT 1 FROM q)) AND t.p IS NOT NULL
				THEN length(pg_notify($5::text, t.p)::text) END::int8
			FROM (SELECT `+targets+` AS p) t`),
			kind, hash, []byte(owner), m, b.names.channel, string(b.payload(hash))).QueryRow(func(row pgx.Row) error {
			var n *int64
			return row.Scan(&held, &n)
		})
		batch.Queue(b.names.expandPattern(sqlIdle), kind, hash)
		return c.SendBatch(ctx, batch).Close()
	})
	if err != nil {
		return err
	}
	if held == 0 {
		return lockx.ErrNotHeld
	}
	return nil
}

// Targeted wake-ups. A NOTIFY payload "<hash>" wakes every watcher of the
// key in every process; "<hash> <owner hex> …" only the named owners'
// (dispatch). So a release wakes the waiters that can now be granted, not
// every waiter, each of which would run a decision transaction serialised on
// the key's decision lock only to be refused. The statements below compute
// the payload from the queue as it stands, with $3 (the releasing or
// granted owner) and the hold being released ($3, $4) left out; NULL means
// "notify nobody". At most maxWakeNames owners are named (a NOTIFY payload
// is limited to 8000 bytes); past that the payload wakes every watcher.
const maxWakeNames = 100

// semWake names the queued owners (other than $3) whose requests fit in
// free permits (an SQL expression), in queue order, and at least the queue's
// head; every watcher if nobody is queued (as on the other backends). A
// release frees the permits it returns; a grant that leaves capacity to
// spare frees what it leaves. A waiter that a grow of the limit would let
// in hears of it at its next retry.
func semWake(free string) string {
	return `(SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM {pqueue} WHERE kind = $1 AND hash = $2 AND owner <> $3) THEN $6::text
		ELSE $6::text || ' ' || (SELECT string_agg(encode(owner, 'hex'), ' ' ORDER BY seq)
			FROM (SELECT owner, seq, sum(count) OVER (ORDER BY seq) AS run, row_number() OVER (ORDER BY seq) AS n
				FROM {pqueue} WHERE kind = $1 AND hash = $2 AND owner <> $3) x
			WHERE (run <= ` + free + ` OR n = 1) AND n <= ` + strconv.Itoa(maxWakeNames) + `) END)`
}

// AcquirePermits implements lockx.SemaphoreBackend in one transaction sent
// as one pipelined batch: the decision (sqlPermits) runs on the server, so
// the key's decision lock is held for the statements' time only, not across
// a round trip to the client.
func (b *Backend) AcquirePermits(ctx context.Context, req lockx.PermitRequest) (lockx.Result, error) {
	switch {
	case req.Limit <= 0:
		return lockx.Result{}, &lockx.ArgError{Arg: "limit", Reason: "must be positive"}
	case req.Count <= 0:
		return lockx.Result{}, &lockx.ArgError{Arg: "permits", Reason: "must be positive"}
	case req.Count > req.Limit:
		return lockx.Result{}, &lockx.ArgError{Arg: "permits", Reason: "more than the limit"}
	}
	ask := refusal{hash: b.hash(req.Key), kind: kindSem, mode: rowPermit, limit: req.Limit, count: req.Count}
	if res, ok := b.answerLocally(req.Request, ask); ok {
		return res, nil
	}
	seq, listening := b.refs.mark(b)
	var res lockx.Result
	err := b.patternTx(ctx, "acquire permits", kindSem, req.Key, func(c *pgx.Conn, hash, lock int64) error {
		var own, granted, ttl, notified *int64
		var queued int64
		batch := &pgx.Batch{}
		batch.Queue("BEGIN")
		b.head(batch, kindSem, hash, lock)
		batch.Queue(b.names.expandPattern(sqlPermits), kindSem, hash, []byte(req.Owner), ms(req.Lease), req.Fair,
			string(b.payload(hash)), req.Count, req.Limit, req.Wait, ms(b.queueTTL(req.QueueTTL)), b.names.channel).QueryRow(func(row pgx.Row) error {
			return row.Scan(&own, &granted, &ttl, &queued, &notified)
		})
		batch.Queue("COMMIT")
		if err := c.SendBatch(ctx, batch).Close(); err != nil {
			return err
		}
		switch {
		case own != nil:
			res = lockx.Result{Acquired: true, Token: lockx.Token(*own), TTL: req.Lease}
		case granted != nil:
			res = lockx.Result{Acquired: true, Token: lockx.Token(*granted), TTL: req.Lease}
		case ttl != nil:
			res.TTL = time.Duration(max(*ttl, 0)) * time.Millisecond
		}
		return nil
	})
	if err != nil {
		return lockx.Result{}, err
	}
	b.noteAnswer(req.Request, ask, res, seq, listening)
	return res, nil
}

// answerLocally answers a queued fair waiter's retry with a refusal
// without a decision, if nothing can have changed for it since its last
// refused one (refusals.go).
func (b *Backend) answerLocally(req lockx.Request, ask refusal) (lockx.Result, bool) {
	if !req.Fair || !req.Wait {
		return lockx.Result{}, false
	}
	ttl, ok := b.refs.cached(hex.EncodeToString([]byte(req.Owner)), ask)
	return lockx.Result{TTL: ttl}, ok
}

// noteAnswer caches a queued fair waiter's refusal (decided after
// notification seq, while the listener was listening), or forgets the
// owner's cached refusal once it is granted.
func (b *Backend) noteAnswer(req lockx.Request, ask refusal, res lockx.Result, seq uint64, listening bool) {
	owner := hex.EncodeToString([]byte(req.Owner))
	switch {
	case res.Acquired:
		b.refs.forget(owner)
	case req.Fair && req.Wait && listening:
		ask.seq, ask.ttl = seq, res.TTL
		b.refs.refused(owner, ask)
	}
}

// sqlPermits is one semaphore decision for owner $3, after the decision lock
// and the purge: a holder's repeat renews its lease (idempotent per owner);
// otherwise the request is granted when the permits in use, plus (if $5,
// fair) those asked for by the requests queued ahead of $3, plus $7 fit in
// the limit $8; a refused request with $9 (wait) is queued or refreshes its
// place for $10 ms; a queued owner granted with capacity to spare wakes the
// next requests that fit (semWake). $4 lease ms, $6 "<hash>", $11 the
// channel. Returns the holder's token (repeat), the new token (grant), the
// earliest lease's remaining ms, whether it queued, and whether it notified.
var sqlPermits = `WITH own AS (
		UPDATE {pheld} SET expires = clock_timestamp() + $4::int8 * interval '1 millisecond'
		WHERE kind = $1::int2 AND hash = $2::int8 AND owner = $3::bytea AND mode = 3 RETURNING token),
	st AS (SELECT
		(SELECT coalesce(sum(count), 0)::int8 FROM {pheld} WHERE kind = $1 AND hash = $2) AS used,
		CASE WHEN $5::bool THEN (SELECT coalesce(sum(count), 0)::int8 FROM {pqueue}
			WHERE kind = $1 AND hash = $2 AND owner <> $3 AND seq < coalesce(` + sqlOwnSeq + `, 9223372036854775807)) ELSE 0 END AS ahead,
		(SELECT (extract(epoch FROM min(expires) - clock_timestamp()) * 1000)::int8 FROM {pheld} WHERE kind = $1 AND hash = $2) AS ttl,
		EXISTS (SELECT 1 FROM own) AS mine),
	d AS (SELECT NOT mine AND used + ahead + $7::int8 <= $8::int8 AS ok,
		NOT mine AND used + ahead + $7::int8 > $8::int8 AS refuse, used, ttl FROM st),
	ins AS (INSERT INTO {pheld} (kind, hash, owner, mode, count, token, expires)
		SELECT $1, $2, $3, 3, $7, {fence}, clock_timestamp() + $4::int8 * interval '1 millisecond' FROM d WHERE ok
		RETURNING token),
	enq AS (INSERT INTO {pqueue} (kind, hash, owner, mode, count, seq, expires)
		SELECT $1, $2, $3, 3, $7, {fence}, clock_timestamp() + $10::int8 * interval '1 millisecond' FROM d WHERE refuse AND $9::bool
		ON CONFLICT (kind, hash, owner) DO UPDATE SET mode = EXCLUDED.mode, count = EXCLUDED.count, expires = EXCLUDED.expires
		RETURNING 1),
	deq AS (DELETE FROM {pqueue} WHERE kind = $1 AND hash = $2 AND owner = $3 AND (SELECT ok FROM d) RETURNING 1)
	SELECT (SELECT token FROM own), (SELECT token FROM ins), d.ttl, (SELECT count(*) FROM enq),
		CASE WHEN EXISTS (SELECT 1 FROM deq) AND $8 - d.used - $7 > 0 THEN
			(SELECT length(pg_notify($11::text, w.p)::text) FROM (SELECT ` + semWake("($8 - d.used - $7)") + ` AS p) w WHERE w.p IS NOT NULL)
		END::int8
	FROM d`

// ExtendPermits implements lockx.SemaphoreBackend.
func (b *Backend) ExtendPermits(ctx context.Context, key string, owner lockx.Owner, lease time.Duration) error {
	return b.extendPattern(ctx, "extend permits", kindSem, key, owner, rowPermit, lease)
}

// ReleasePermits implements lockx.SemaphoreBackend. It notifies the key's
// watchers.
func (b *Backend) ReleasePermits(ctx context.Context, key string, owner lockx.Owner) error {
	return b.releasePattern(ctx, "release permits", kindSem, key, owner, rowPermit)
}

// Permits implements lockx.SemaphoreBackend, in one round trip.
func (b *Backend) Permits(ctx context.Context, key string) (lockx.PermitUsage, error) {
	var u lockx.PermitUsage
	err := b.patternTx(ctx, "permits", kindSem, key, func(c *pgx.Conn, hash, lock int64) error {
		batch := &pgx.Batch{}
		b.head(batch, kindSem, hash, lock)
		batch.Queue(b.names.expandPattern(`SELECT
			(SELECT coalesce(sum(count), 0)::int8 FROM {pheld} WHERE kind = $1 AND hash = $2),
			(SELECT count(*) FROM {pheld} WHERE kind = $1 AND hash = $2),
			(SELECT count(*) FROM {pqueue} WHERE kind = $1 AND hash = $2)`), kindSem, hash).QueryRow(func(row pgx.Row) error {
			return row.Scan(&u.InUse, &u.Holders, &u.Waiting)
		})
		return c.SendBatch(ctx, batch).Close()
	})
	return u, err
}
