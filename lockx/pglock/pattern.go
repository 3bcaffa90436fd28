package pglock

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lockx-go/lockx/lockx"
)

// Read/write locks and semaphores (lockx.RWBackend, lockx.SemaphoreBackend)
// are table-based: each hold — each reader, the writer, each permit holder —
// is one row of lockx_pattern_held with a lease on the server's clock, and
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

// head queues the decision lock and purge of a key on batch.
func (b *Backend) head(batch *pgx.Batch, kind int, hash, lock int64) {
	batch.Queue(sqlDecide, lock)
	batch.Queue(b.names.expandPattern(sqlPurge), kind, hash)
}

// sqlIdle forgets the key's read epoch once nobody holds or awaits it.
const sqlIdle = `DELETE FROM {pstate} s WHERE s.kind = $1 AND s.hash = $2
	AND NOT EXISTS (SELECT 1 FROM {pheld} h WHERE h.kind = $1 AND h.hash = $2)
	AND NOT EXISTS (SELECT 1 FROM {pqueue} q WHERE q.kind = $1 AND q.hash = $2)`

// sqlEnqueue adds owner to the key's queue or refreshes its entry
// (keeping its place). $1 kind, $2 hash, $3 owner, $4 mode, $5 count,
// $6 queue TTL ms.
const sqlEnqueue = `INSERT INTO {pqueue} (kind, hash, owner, mode, count, seq, expires)
	VALUES ($1, $2, $3, $4, $5, {fence}, clock_timestamp() + $6 * interval '1 millisecond')
	ON CONFLICT (kind, hash, owner) DO UPDATE SET mode = EXCLUDED.mode, count = EXCLUDED.count, expires = EXCLUDED.expires`

// sqlDequeue withdraws $3 from the key's queue.
const sqlDequeue = `DELETE FROM {pqueue} WHERE kind = $1 AND hash = $2 AND owner = $3`

func (b *Backend) queueTTL(d time.Duration) time.Duration {
	if d <= 0 {
		return lockx.DefaultQueueTTL
	}
	return d
}

// ownSeq is owner's place in the queue, or nil if it is not queued.
const sqlOwnSeq = `(SELECT seq FROM {pqueue} WHERE kind = $1 AND hash = $2 AND owner = $3)`

// sqlRWState reads everything a read/write decision needs, for owner $3:
// its own modes (bit 1 read, 2 write), other writers, other readers, the
// blocking writer's and the first reader's remaining lease (ms), whether
// the queue's head is someone else, and whether a writer is queued ahead
// of $3.
const sqlRWState = `SELECT
	coalesce(bit_or(CASE WHEN h.owner = $3 THEN h.mode END), 0)::int8,
	count(*) FILTER (WHERE h.owner <> $3 AND h.mode = 2),
	count(*) FILTER (WHERE h.owner <> $3 AND h.mode = 1),
	(extract(epoch FROM max(h.expires) FILTER (WHERE h.owner <> $3 AND h.mode = 2) - clock_timestamp()) * 1000)::int8,
	(extract(epoch FROM min(h.expires) FILTER (WHERE h.owner <> $3 AND h.mode = 1) - clock_timestamp()) * 1000)::int8,
	coalesce((SELECT q.owner <> $3 FROM {pqueue} q WHERE q.kind = $1 AND q.hash = $2 ORDER BY q.seq LIMIT 1), false),
	EXISTS (SELECT 1 FROM {pqueue} q WHERE q.kind = $1 AND q.hash = $2 AND q.mode = 2 AND q.owner <> $3
		AND q.seq < coalesce(` + sqlOwnSeq + `, 9223372036854775807))
	FROM {pheld} h WHERE h.kind = $1 AND h.hash = $2`

// sqlHold records (or renews) owner $3's mode $4 hold with the key's
// current token. $5 lease ms.
const sqlHold = `INSERT INTO {pheld} (kind, hash, owner, mode, count, token, expires)
	VALUES ($1, $2, $3, $4, 1, (SELECT token FROM {pstate} WHERE kind = $1 AND hash = $2), clock_timestamp() + $5 * interval '1 millisecond')
	ON CONFLICT (kind, hash, owner, mode) DO UPDATE SET expires = EXCLUDED.expires, token = EXCLUDED.token
	RETURNING token`

// AcquireRW implements lockx.RWBackend in one transaction of two round
// trips: the state, then the decision's writes and the commit.
func (b *Backend) AcquireRW(ctx context.Context, mode lockx.RWMode, req lockx.Request) (lockx.Result, error) {
	if mode != lockx.ModeRead && mode != lockx.ModeWrite {
		return lockx.Result{}, &lockx.ArgError{Arg: "mode", Reason: "neither read nor write"}
	}
	var res lockx.Result
	owner := []byte(req.Owner)
	err := b.patternTx(ctx, "acquire "+mode.String(), kindRW, req.Key, func(c *pgx.Conn, hash, lock int64) error {
		var mine, otherW, otherR int64
		var wttl, rttl *int64
		var headOther, writerAhead bool
		first := &pgx.Batch{}
		first.Queue("BEGIN")
		b.head(first, kindRW, hash, lock)
		first.Queue(b.names.expandPattern(sqlRWState), kindRW, hash, owner).QueryRow(func(row pgx.Row) error {
			return row.Scan(&mine, &otherW, &otherR, &wttl, &rttl, &headOther, &writerAhead)
		})
		if err := c.SendBatch(ctx, first).Close(); err != nil {
			return err
		}
		second := &pgx.Batch{}
		var tok int64
		granted := false
		m := rowRead
		if mode == lockx.ModeWrite {
			m = rowWrite
		}
		grant := func() {
			granted = true
			second.Queue(b.names.expandPattern(sqlHold), kindRW, hash, owner, m, ms(req.Lease)).QueryRow(func(row pgx.Row) error {
				return row.Scan(&tok)
			})
			second.Queue(b.names.expandPattern(sqlDequeue), kindRW, hash, owner)
		}
		refuse := func(queue bool) {
			switch {
			case wttl != nil:
				res = lockx.Result{TTL: time.Duration(max(*wttl, 0)) * time.Millisecond}
			case rttl != nil:
				res = lockx.Result{TTL: time.Duration(max(*rttl, 0)) * time.Millisecond}
			}
			if req.Wait && queue {
				second.Queue(b.names.expandPattern(sqlEnqueue), kindRW, hash, owner, m, int64(1), ms(b.queueTTL(req.QueueTTL)))
			}
		}
		switch {
		case mode == lockx.ModeWrite && mine&rowWrite != 0: // idempotent per owner
			grant()
		case mode == lockx.ModeWrite && mine&rowRead != 0:
			return lockx.ErrUpgrade
		case mode == lockx.ModeWrite && (otherW > 0 || otherR > 0 || headOther):
			refuse(true)
		case mode == lockx.ModeWrite:
			// A new write: a new token, which later readers share.
			second.Queue(b.names.expandPattern(`INSERT INTO {pstate} (kind, hash, token) VALUES ($1, $2, {fence})
				ON CONFLICT (kind, hash) DO UPDATE SET token = EXCLUDED.token`), kindRW, hash)
			grant()
		case mine&rowRead != 0: // idempotent per owner
			grant()
		case otherW > 0:
			refuse(req.Fair)
		case req.Fair && mine&rowWrite == 0 && writerAhead:
			// Writer preference: a writer queued ahead of us goes first.
			refuse(true)
		default:
			// The key's read epoch, or a fresh token if it was idle.
			second.Queue(b.names.expandPattern(`INSERT INTO {pstate} (kind, hash, token) VALUES ($1, $2, {fence})
				ON CONFLICT (kind, hash) DO NOTHING`), kindRW, hash)
			grant()
		}
		second.Queue("COMMIT")
		if err := c.SendBatch(ctx, second).Close(); err != nil {
			return err
		}
		if granted {
			res = lockx.Result{Acquired: true, Token: lockx.Token(tok), TTL: req.Lease}
		}
		return nil
	})
	if err != nil {
		return lockx.Result{}, err
	}
	return res, nil
}

// ExtendRW implements lockx.RWBackend.
func (b *Backend) ExtendRW(ctx context.Context, mode lockx.RWMode, key string, owner lockx.Owner, lease time.Duration) error {
	if mode != lockx.ModeRead && mode != lockx.ModeWrite {
		return &lockx.ArgError{Arg: "mode", Reason: "neither read nor write"}
	}
	m := rowRead
	if mode == lockx.ModeWrite {
		m = rowWrite
	}
	return b.extendPattern(ctx, "extend "+mode.String(), kindRW, key, owner, m, lease)
}

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

// ReleaseRW implements lockx.RWBackend. It notifies the key's watchers.
func (b *Backend) ReleaseRW(ctx context.Context, mode lockx.RWMode, key string, owner lockx.Owner) error {
	if mode != lockx.ModeRead && mode != lockx.ModeWrite {
		return &lockx.ArgError{Arg: "mode", Reason: "neither read nor write"}
	}
	m := rowRead
	if mode == lockx.ModeWrite {
		m = rowWrite
	}
	return b.releasePattern(ctx, "release "+mode.String(), kindRW, key, owner, m)
}

// releasePattern frees a hold and withdraws its owner from the queue in one
// round trip (one implicit transaction), notifying the waiters that may now
// be granted (patternWake) if anything changed.
func (b *Backend) releasePattern(ctx context.Context, op string, kind int, key string, owner lockx.Owner, m int) error {
	var held int64
	targets := sqlRWWake
	if kind == kindSem {
		targets = semWake("(SELECT coalesce(sum(count), 0) FROM d)")
	}
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

// sqlRWWake: nobody while a writer still holds the key; the readers queued
// before the first queued writer; that writer if no reader is queued before
// it and no reader still holds; and every watcher if no writer is queued
// (readers under reader preference wait without queueing). $6 is "<hash>".
var sqlRWWake = `(WITH q AS (SELECT owner, mode, seq FROM {pqueue} WHERE kind = $1 AND hash = $2 AND owner <> $3),
		w AS (SELECT min(seq) AS s FROM q WHERE mode = 2),
		r AS (SELECT owner, seq FROM q WHERE seq < coalesce((SELECT s FROM w), 9223372036854775807))
	SELECT CASE
		WHEN EXISTS (SELECT 1 FROM {pheld} WHERE kind = $1 AND hash = $2 AND mode = 2 AND NOT (owner = $3 AND mode = $4)) THEN NULL
		WHEN (SELECT s FROM w) IS NULL OR (SELECT count(*) FROM r) > ` + strconv.Itoa(maxWakeNames) + ` THEN $6::text
		WHEN EXISTS (SELECT 1 FROM r) THEN $6::text || ' ' || (SELECT string_agg(encode(owner, 'hex'), ' ' ORDER BY seq) FROM r)
		WHEN NOT EXISTS (SELECT 1 FROM {pheld} WHERE kind = $1 AND hash = $2 AND mode = 1 AND NOT (owner = $3 AND mode = $4))
			THEN $6::text || ' ' || (SELECT encode(owner, 'hex') FROM q WHERE seq = (SELECT s FROM w))
	END)`

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

// AcquirePermits implements lockx.SemaphoreBackend in one transaction of
// two round trips.
func (b *Backend) AcquirePermits(ctx context.Context, req lockx.PermitRequest) (lockx.Result, error) {
	switch {
	case req.Limit <= 0:
		return lockx.Result{}, &lockx.ArgError{Arg: "limit", Reason: "must be positive"}
	case req.Count <= 0:
		return lockx.Result{}, &lockx.ArgError{Arg: "permits", Reason: "must be positive"}
	case req.Count > req.Limit:
		return lockx.Result{}, &lockx.ArgError{Arg: "permits", Reason: "more than the limit"}
	}
	var res lockx.Result
	owner := []byte(req.Owner)
	err := b.patternTx(ctx, "acquire permits", kindSem, req.Key, func(c *pgx.Conn, hash, lock int64) error {
		var own *int64
		var inUse, ahead int64
		var ttl *int64
		first := &pgx.Batch{}
		first.Queue("BEGIN")
		b.head(first, kindSem, hash, lock)
		// A holder's repeat renews its lease (idempotent per owner).
		first.Queue(b.names.expandPattern(`UPDATE {pheld} SET expires = clock_timestamp() + $4 * interval '1 millisecond'
			WHERE kind = $1 AND hash = $2 AND owner = $3 AND mode = 3 RETURNING token`), kindSem, hash, owner, ms(req.Lease)).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				if err := rows.Scan(&own); err != nil {
					return err
				}
			}
			return rows.Err()
		})
		first.Queue(b.names.expandPattern(`SELECT
			(SELECT coalesce(sum(count), 0)::int8 FROM {pheld} WHERE kind = $1 AND hash = $2),
			CASE WHEN $4 THEN (SELECT coalesce(sum(count), 0)::int8 FROM {pqueue}
				WHERE kind = $1 AND hash = $2 AND owner <> $3 AND seq < coalesce(`+sqlOwnSeq+`, 9223372036854775807)) ELSE 0 END,
			(SELECT (extract(epoch FROM min(expires) - clock_timestamp()) * 1000)::int8 FROM {pheld} WHERE kind = $1 AND hash = $2)`),
			kindSem, hash, owner, req.Fair).QueryRow(func(row pgx.Row) error {
			return row.Scan(&inUse, &ahead, &ttl)
		})
		if err := c.SendBatch(ctx, first).Close(); err != nil {
			return err
		}
		second := &pgx.Batch{}
		switch {
		case own != nil:
			res = lockx.Result{Acquired: true, Token: lockx.Token(*own), TTL: req.Lease}
		case inUse+ahead+req.Count > req.Limit:
			if ttl != nil {
				res.TTL = time.Duration(max(*ttl, 0)) * time.Millisecond
			}
			if req.Wait {
				second.Queue(b.names.expandPattern(sqlEnqueue), kindSem, hash, owner, rowPermit, req.Count, ms(b.queueTTL(req.QueueTTL)))
			}
		default:
			second.Queue(b.names.expandPattern(`INSERT INTO {pheld} (kind, hash, owner, mode, count, token, expires)
				VALUES ($1, $2, $3, 3, $4, {fence}, clock_timestamp() + $5 * interval '1 millisecond') RETURNING token`),
				kindSem, hash, owner, req.Count, ms(req.Lease)).QueryRow(func(row pgx.Row) error {
				var t int64
				if err := row.Scan(&t); err != nil {
					return err
				}
				res = lockx.Result{Acquired: true, Token: lockx.Token(t), TTL: req.Lease}
				return nil
			})
			// A queued owner leaving with capacity to spare: the next queued
			// requests may fit now.
			second.Queue(b.names.expandPattern(`WITH q AS (DELETE FROM {pqueue} WHERE kind = $1 AND hash = $2 AND owner = $3 RETURNING 1)
				SELECT CASE WHEN EXISTS (SELECT 1 FROM q) AND $4::int8 > 0 AND t.p IS NOT NULL
				THEN length(pg_notify($5::text, t.p)::text) END::int8
				FROM (SELECT `+semWake("$4::int8")+` AS p) t`),
				kindSem, hash, owner, req.Limit-inUse-req.Count, b.names.channel, string(b.payload(hash)))
		}
		second.Queue("COMMIT")
		return c.SendBatch(ctx, second).Close()
	})
	if err != nil {
		return lockx.Result{}, err
	}
	return res, nil
}

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
