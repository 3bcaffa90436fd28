package pglock

import (
	"context"
	"encoding/hex"
	"errors"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/lockx-go/lockx/lockx/driver"
)

// Semaphores (driver.SemaphoreBackend) are table-based: each permit holder is
// one row of lockx_pattern_held with a lease on the server's clock, each
// waiter a row of lockx_pattern_queue with its count and its own limit.
// Decisions on a key are serialised by a transaction-scoped advisory lock on
// the key's pattern hash (patternTx, head), so the limit holds across every
// process, and a crashed holder's row simply stops counting when its lease
// ends.
//
// Grants are handed over, not competed for: a release (and a grant that
// leaves permits to spare) grants, in the same statement, the prefix of the
// queue whose requests fit — each checked against its own requester's limit
// — by moving their rows from the queue to the held table, and NOTIFYs
// exactly those owners. A woken owner then only confirms its grant: one
// UPDATE of its own row that starts its lease (semConfirm), without the
// decision lock. So a contended permit costs two decisions (the attempt that
// queues the waiter, and the release that hands it on) and one unserialised
// statement, where it cost three decisions before (the queueing attempt, a
// granting attempt racing the other woken waiters for the decision lock,
// the release). While the Backend already has waiters queued on the key,
// the attempt that queues one more is a short statement (semQueueUp) rather
// than the full decision. Until it is confirmed, a handed-over grant keeps
// the queue entry's expiry, so a waiter that died while queued returns it
// within its queue TTL.

// namedAfter reports whether a notification after seq named owner (or woke
// every watcher after a reconnection).
func (r *refusals) namedAfter(owner string, seq uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reset > seq || r.named[owner].seq > seq
}

// AcquirePermits implements driver.SemaphoreBackend. A queued owner takes a
// grant handed over to it with its lease started, if a decision of this
// Backend did so (sem_local.go), without a statement. Otherwise one named
// in a notification since it queued first confirms a grant handed over to
// it (one statement, no decision lock); otherwise, or if there was none, the
// decision is one transaction sent as one pipelined batch: it runs on the
// server, so the key's decision lock is held for the statements' time only,
// not across a round trip to the client.
func (b *Backend) AcquirePermits(ctx context.Context, req driver.PermitRequest) (driver.Result, error) {
	if err := driver.CheckPermitRequest(req); err != nil {
		return driver.Result{}, err
	}
	hash := b.hash(req.Key)
	owner := hex.EncodeToString([]byte(req.Owner))
	if tok, left, ok := b.semTake(hash, owner, req.Limit, req.Lease); ok {
		b.refs.forget(owner)
		return driver.Result{Acquired: true, Token: driver.Token(tok), TTL: left}, nil
	}
	ask := refusal{hash: hash, kind: kindSem, mode: rowPermit, limit: req.Limit, count: req.Count}
	if res, ok := b.answerLocally(req.Request, ask); ok {
		return res, nil
	}
	if at, ok := b.semQueuedAt(hash, owner); ok && b.refs.namedAfter(owner, at) {
		tok, over, err := b.semConfirm(ctx, req.Key, req.Owner, req.Lease, req.Limit)
		if err != nil {
			return driver.Result{}, err
		}
		if tok != 0 {
			b.semForget(hash, owner)
			b.refs.forget(owner)
			return driver.Result{Acquired: true, Token: driver.Token(tok), TTL: req.Lease}, nil
		}
		if over {
			// Handed over under the limit the owner queued with, which it
			// has lowered since (a shrink): give the permits back (to the
			// next that fit) and decide afresh, which queues it again.
			if err := b.ReleasePermits(ctx, req.Key, req.Owner); err != nil && !errors.Is(err, driver.ErrNotHeld) {
				return driver.Result{}, err
			}
		}
	}
	seq, listening := b.refs.mark(b)
	var res driver.Result
	var queued int64
	// Under contention most attempts are refused and queued: while this
	// Backend has waiters queued on the key, an attempt first tries the
	// short refusal (sqlQueuePermits), and decides in full only if that
	// finds the request could fit (or the owner holds permits).
	refused := false
	if b.semContended(hash) {
		var err error
		if refused, res.TTL, queued, err = b.semQueueUp(ctx, hash, req); err != nil {
			return driver.Result{}, err
		}
	}
	for attempt := 0; !refused; attempt++ {
		var over bool
		var h semHanded
		err := b.semDecide(ctx, "acquire permits", req.Key, func(batch *pgx.Batch) {
			local, leases := h.prepare(b, hash)
			batch.Queue(b.names.expandPattern(sqlPermits), kindSem, hash, []byte(req.Owner), ms(req.Lease), req.Fair,
				string(b.payload(hash)), req.Count, req.Limit, req.Wait, ms(b.queueTTL(req.QueueTTL)), b.names.channel,
				local, leases).QueryRow(func(row pgx.Row) error {
				var own, granted, ttl, notified *int64
				if err := row.Scan(&own, &granted, &ttl, &queued, &notified, &over, &h.owners, &h.tokens); err != nil {
					return err
				}
				switch {
				case own != nil:
					res = driver.Result{Acquired: true, Token: driver.Token(*own), TTL: req.Lease}
				case granted != nil:
					res = driver.Result{Acquired: true, Token: driver.Token(*granted), TTL: req.Lease}
				case ttl != nil:
					res.TTL = time.Duration(max(*ttl, 0)) * time.Millisecond
				}
				return nil
			})
		})
		if err != nil {
			return driver.Result{}, err
		}
		h.record(b, hash)
		if !over || attempt > 0 {
			break
		}
		// The owner holds permits the limit it asks with no longer allows: a
		// grant handed over under the limit it queued with, lowered since,
		// that reached this decision unconfirmed (its notification not yet
		// seen, or seen by another Backend). As semConfirm refuses it, give
		// the permits back (to the next that fit) and decide afresh.
		if err := b.ReleasePermits(ctx, req.Key, req.Owner); err != nil && !errors.Is(err, driver.ErrNotHeld) {
			return driver.Result{}, err
		}
		res, queued = driver.Result{}, 0
	}
	switch {
	case res.Acquired:
		b.semForget(hash, owner)
	case queued > 0:
		b.semQueued(hash, owner, seq, req)
	}
	b.noteAnswer(req.Request, ask, res, seq, listening)
	return res, nil
}

// semContended reports whether this Backend has waiters queued on hash: an
// attempt on the key is then most likely refused.
func (b *Backend) semContended(hash int64) bool {
	s := &b.sem
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.waits[hash]) > 0
}

// semQueueUp is a decision that can only refuse: if the permits in use plus
// req's count exceed req's limit and the owner holds none, the request is
// refused whatever is queued ahead of it — as the full decision
// (sqlPermits) would refuse it — and queued if it waits. refused is false
// if the full decision must be made. It costs a fraction of the full
// decision's statement, whose plan (grant, renewal, hand-over, wake-up)
// is mostly set up for nothing when the answer is a refusal. With refused
// it returns the earliest lease's remaining time and whether it queued.
func (b *Backend) semQueueUp(ctx context.Context, hash int64, req driver.PermitRequest) (refused bool, ttl time.Duration, queued int64, err error) {
	err = b.semDecide(ctx, "acquire permits", req.Key, func(batch *pgx.Batch) {
		batch.Queue(b.names.expandPattern(sqlQueuePermits), kindSem, hash, []byte(req.Owner), req.Count, req.Limit, req.Wait,
			ms(b.queueTTL(req.QueueTTL))).QueryRow(func(row pgx.Row) error {
			var left *int64
			if err := row.Scan(&refused, &left, &queued); err != nil {
				return err
			}
			if refused && left != nil {
				ttl = time.Duration(max(*left, 0)) * time.Millisecond
			}
			return nil
		})
	})
	return refused, ttl, queued, err
}

// sqlQueuePermits refuses owner $3's request for $4 permits under limit $5
// if the permits in use leave no room for it and the owner holds none, and
// then queues it (or refreshes its entry, keeping its place) when it waits
// ($6) for $7 ms, exactly as sqlPermits does for a refusal. Returns whether
// it refused, the earliest lease's remaining ms and whether it queued.
var sqlQueuePermits = `WITH u AS (SELECT coalesce(sum(count), 0)::int8 AS used,
		` + sqlSemLeftMS + ` AS ttl FROM {pheld} WHERE kind = $1::int2 AND hash = $2::int8),
	r AS (SELECT u.used + $4::int8 > $5::int8 AND NOT EXISTS (SELECT 1 FROM {pheld}
		WHERE kind = $1 AND hash = $2 AND owner = $3::bytea AND mode = 3) AS refuse, u.ttl FROM u),
	enq AS (` + semEnqueue("$4", "$5", "$7", "r WHERE r.refuse AND $6::bool") + `)
	SELECT r.refuse, r.ttl, (SELECT count(*) FROM enq) FROM r`

// sqlSemLeftMS, over a key's held permits, is the ms left of the earliest
// lease: the TTL a refusal reports, by the full decision (sqlPermits) and
// the short refusal (sqlQueuePermits) alike.
const sqlSemLeftMS = `(extract(epoch FROM min(expires) - clock_timestamp()) * 1000)::int8`

// semEnqueue queues owner $3 of key ($1, $2) for count permits under its
// limit lim, for qttl ms, from the rows of from (a refusal that waits), or
// refreshes its entry, keeping its place: the queueing of sqlPermits and
// of the short refusal (sqlQueuePermits), one text so they cannot differ.
func semEnqueue(count, lim, qttl, from string) string {
	return `INSERT INTO {pqueue} (kind, hash, owner, mode, count, seq, expires, lim)
		SELECT $1, $2, $3, 3, ` + count + `, {fence}, clock_timestamp() + ` + qttl + `::int8 * interval '1 millisecond', ` + lim + ` FROM ` + from + `
		ON CONFLICT (kind, hash, owner) DO UPDATE SET mode = EXCLUDED.mode, count = EXCLUDED.count, expires = EXCLUDED.expires, lim = EXCLUDED.lim
		RETURNING 1`
}

// semConfirm starts the lease of a grant handed over to owner and returns
// its token, or 0 if owner holds no permits of key. It needs no decision
// lock: it only moves its own row's lease. The grant was checked against
// the limit the owner queued with; if the permits in use now exceed limit
// (the owner's limit now, lowered since), the grant is not confirmed and
// over reports that it is still there.
func (b *Backend) semConfirm(ctx context.Context, key string, owner driver.Owner, lease time.Duration, limit int64) (tok int64, over bool, err error) {
	err = b.patternTx(ctx, "acquire permits", kindSem, key, func(c *pgx.Conn, hash, _ int64) error {
		var t *int64
		if err := c.QueryRow(ctx, b.names.expandPattern(sqlConfirmPermits), kindSem, hash, []byte(owner), ms(lease), limit).Scan(&t, &over); err != nil {
			return err
		}
		if t != nil {
			tok, over = *t, false
		}
		return nil
	})
	return tok, over, err
}

// sqlConfirmPermits confirms owner $3's handed-over grant with lease $4 ms
// if the permits in use fit in its limit $5. Returns the token if
// confirmed, and whether the owner holds live permits.
const sqlConfirmPermits = `WITH u AS (SELECT coalesce(sum(count), 0)::int8 AS used FROM {pheld}
		WHERE kind = $1 AND hash = $2 AND expires > clock_timestamp()),
	c AS (UPDATE {pheld} SET expires = clock_timestamp() + $4::int8 * interval '1 millisecond'
		WHERE kind = $1 AND hash = $2 AND owner = $3 AND mode = 3 AND expires > clock_timestamp()
		AND (SELECT used FROM u) <= $5::int8 RETURNING token)
	SELECT (SELECT token FROM c), EXISTS (SELECT 1 FROM {pheld}
		WHERE kind = $1 AND hash = $2 AND owner = $3 AND mode = 3 AND expires > clock_timestamp())`

// semHead queues the head of a semaphore decision: its commit does not wait
// for the WAL flush once the fence guard's marker shows that the fence
// sequence was moved past anything a crash could have un-issued
// (fence_guard.go) — a grant draws its token with nextval, which writes WAL
// every 32 values, and would otherwise hold the decision lock for a disk
// flush — with the key's decision lock in the same statement, then the
// purge (sqlPurge), a statement of its own so its snapshot follows the lock.
func (b *Backend) semHead(batch *pgx.Batch, hash, lock int64) {
	batch.Queue(`SELECT set_config('synchronous_commit', CASE WHEN EXISTS (SELECT 1 FROM `+b.names.epoch+`) THEN 'off' ELSE 'on' END, true),
		pg_advisory_xact_lock($1)`, lock)
	batch.Queue(b.names.expandPattern(sqlPurge), kindSem, hash)
}

// semHandOver grants the queued requests (other than $3's) that fit after
// the permits in use become the SQL expression used (NULL: grant none): the
// prefix of the queue, in order, whose every request fits within its own
// requester's limit (lim) — a request that does not fit stops the
// hand-over, so a large request is not overtaken. It defines the CTEs hv
// (the owners granted, with their new tokens and whether their lease
// started). A handed-over row keeps its queue entry's expiry until its
// owner confirms it (semConfirm), unless its owner is one of the parameter
// local (bytea[]), this Backend's own waiters, whose leases in ms are
// leases (int8[]): their lease starts at once (sem_local.go).
func semHandOver(used, local, leases string) string {
	return `hg AS (SELECT owner, count, expires, seq FROM (
			SELECT owner, count, expires, seq, bool_and(` + used + ` + run <= lim) OVER (ORDER BY seq) AS fits
			FROM (SELECT owner, count, expires, seq, lim, sum(count) OVER (ORDER BY seq) AS run
				FROM {pqueue} WHERE kind = $1 AND hash = $2 AND owner <> $3 AND ` + used + ` IS NOT NULL) r) f
		WHERE fits ORDER BY seq LIMIT ` + strconv.Itoa(maxWakeNames) + `),
	hv AS (INSERT INTO {pheld} (kind, hash, owner, mode, count, token, expires)
		SELECT $1, $2, owner, 3, count, {fence}, coalesce(clock_timestamp() + (SELECT l.lease FROM unnest(` + local + `, ` + leases + `) l (owner, lease)
			WHERE l.owner = o.owner LIMIT 1) * interval '1 millisecond', expires) FROM (SELECT * FROM hg ORDER BY seq) o
		ON CONFLICT DO NOTHING RETURNING owner, token, coalesce(owner = ANY (` + local + `), false) AS started),
	hq AS (DELETE FROM {pqueue} WHERE kind = $1 AND hash = $2 AND owner = ANY (ARRAY(SELECT owner FROM hv)))`
}

// semStartedCols are the owners and tokens of the grants a hand-over
// (semHandOver) started the lease of, in token order.
const semStartedCols = `(SELECT array_agg(owner ORDER BY token) FROM hv WHERE started),
		(SELECT array_agg(token ORDER BY token) FROM hv WHERE started)`

// semHandOverPayload is the NOTIFY payload after a hand-over: the owners
// granted, but for those whose lease it started (this Backend's waiters,
// woken by semStarted), and NULL if it started every grant's; if none, the
// queue's head if its limit is unknown (a row queued before limits were
// stored), so that it decides for itself; every watcher if nobody is
// queued (waiters that do not queue); NULL: nobody. $p is the payload
// "<hash>".
func semHandOverPayload(p string) string {
	return `(SELECT CASE
		WHEN EXISTS (SELECT 1 FROM hv WHERE NOT started) THEN ` + p + ` || ' ' || (SELECT string_agg(encode(owner, 'hex'), ' ') FROM hv WHERE NOT started)
		WHEN EXISTS (SELECT 1 FROM hv) THEN NULL
		WHEN NOT EXISTS (SELECT 1 FROM {pqueue} WHERE kind = $1 AND hash = $2 AND owner <> $3) THEN ` + p + `
		ELSE (SELECT CASE WHEN lim = 0 THEN ` + p + ` || ' ' || encode(owner, 'hex') END FROM {pqueue}
			WHERE kind = $1 AND hash = $2 AND owner <> $3 ORDER BY seq LIMIT 1) END)`
}

// sqlPermits is one semaphore decision for owner $3, after the decision lock
// and the purge: a holder's repeat renews its lease (idempotent per owner,
// and how a grant handed over is taken up when its notification was
// missed) if the permits in use fit in the limit $8 — like semConfirm, so a
// grant handed over under a limit lowered since is not taken up this way
// either; the last column reports it (over), and AcquirePermits gives it
// back and decides again; otherwise the request is granted when the permits in use, plus
// (if $5, fair) those asked for by the requests queued ahead of $3, plus $7
// fit in the limit $8; a refused request with $9 (wait) is queued with its
// limit, or refreshes its place, for $10 ms; a grant with permits to spare
// hands them over to the queue (semHandOver, $12 and $13 this Backend's
// waiters and their leases). $4 lease ms, $6 "<hash>", $11 the channel.
// Returns the holder's token (repeat), the new token (grant), the earliest
// lease's remaining ms, whether it queued, whether it notified, over, and
// the grants handed over with their lease started (semStartedCols).
var sqlPermits = `WITH u AS (SELECT coalesce(sum(count), 0)::int8 AS used FROM {pheld} WHERE kind = $1::int2 AND hash = $2::int8),
	own AS (
		UPDATE {pheld} SET expires = clock_timestamp() + $4::int8 * interval '1 millisecond'
		WHERE kind = $1 AND hash = $2 AND owner = $3::bytea AND mode = 3
		AND (SELECT used FROM u) <= $8::int8 RETURNING token),
	st AS (SELECT
		(SELECT used FROM u) AS used,
		CASE WHEN $5::bool AND (SELECT used FROM u) + $7::int8 <= $8::int8 THEN (SELECT coalesce(sum(count), 0)::int8 FROM {pqueue}
			WHERE kind = $1 AND hash = $2 AND owner <> $3 AND seq < coalesce(` + sqlOwnSeq + `, 9223372036854775807)) ELSE 0 END AS ahead,
		(SELECT ` + sqlSemLeftMS + ` FROM {pheld} WHERE kind = $1 AND hash = $2) AS ttl,
		EXISTS (SELECT 1 FROM own) AS mine),
	d AS (SELECT NOT mine AND used + ahead + $7::int8 <= $8::int8 AS ok,
		NOT mine AND used + ahead + $7::int8 > $8::int8 AS refuse, used, ttl FROM st),
	ins AS (INSERT INTO {pheld} (kind, hash, owner, mode, count, token, expires)
		SELECT $1, $2, $3, 3, $7, {fence}, clock_timestamp() + $4::int8 * interval '1 millisecond' FROM d WHERE ok
		RETURNING token),
	enq AS (` + semEnqueue("$7", "$8", "$10", "d WHERE refuse AND $9::bool") + `),
	deq AS (DELETE FROM {pqueue} WHERE kind = $1 AND hash = $2 AND owner = $3 AND (SELECT ok FROM d) RETURNING 1),
	` + semHandOver("(SELECT used + $7 FROM d WHERE ok)", "$12::bytea[]", "$13::int8[]") + `
	SELECT (SELECT token FROM own), (SELECT token FROM ins), d.ttl, (SELECT count(*) FROM enq),
		CASE WHEN EXISTS (SELECT 1 FROM hv) THEN
			(SELECT length(pg_notify($11::text, w.p)::text) FROM (SELECT ` + semHandOverPayload("$6::text") + ` AS p) w WHERE w.p IS NOT NULL)
		END::int8,
		NOT EXISTS (SELECT 1 FROM own) AND EXISTS (SELECT 1 FROM {pheld} WHERE kind = $1 AND hash = $2 AND owner = $3 AND mode = 3),
		` + semStartedCols + `
	FROM d`

// sqlReleasePermits returns owner $3's permits and withdraws it from the
// queue, hands the permits now free over to the queue (semHandOver), and
// notifies (semHandOverPayload) if anything changed. $4 the channel, $5
// "<hash>", $6 and $7 this Backend's waiters and their leases. Returns how
// many holds were released, whether it notified, and the grants handed
// over with their lease started (semStartedCols).
var sqlReleasePermits = `WITH d AS (DELETE FROM {pheld} WHERE kind = $1 AND hash = $2 AND owner = $3 AND mode = 3 RETURNING count),
	q AS (DELETE FROM {pqueue} WHERE kind = $1 AND hash = $2 AND owner = $3 RETURNING 1),
	` + semHandOver(`((SELECT coalesce(sum(count), 0) FROM {pheld} WHERE kind = $1 AND hash = $2) - (SELECT coalesce(sum(count), 0) FROM d))`, "$6::bytea[]", "$7::int8[]") + `
	SELECT (SELECT count(*) FROM d),
		CASE WHEN EXISTS (SELECT 1 FROM d) OR EXISTS (SELECT 1 FROM q) THEN
			(SELECT length(pg_notify($4::text, w.p)::text) FROM (SELECT ` + semHandOverPayload("$5::text") + ` AS p) w WHERE w.p IS NOT NULL)
		END::int8,
		` + semStartedCols

// ExtendPermits implements driver.SemaphoreBackend.
func (b *Backend) ExtendPermits(ctx context.Context, key string, owner driver.Owner, lease time.Duration) error {
	return b.extendPattern(ctx, "extend permits", kindSem, key, owner, rowPermit, lease)
}

// ReleasePermits implements driver.SemaphoreBackend, in one round trip (one
// implicit transaction). It hands the permits it frees over to the queue.
func (b *Backend) ReleasePermits(ctx context.Context, key string, owner driver.Owner) error {
	ownerHex := hex.EncodeToString([]byte(owner))
	hash := b.hash(key)
	b.refs.forget(ownerHex)
	b.semForget(hash, ownerHex)
	var held int64
	var h semHanded
	err := b.semDecide(ctx, "release permits", key, func(batch *pgx.Batch) {
		local, leases := h.prepare(b, hash)
		batch.Queue(b.names.expandPattern(sqlReleasePermits), kindSem, hash, []byte(owner), b.names.channel, string(b.payload(hash)),
			local, leases).QueryRow(func(row pgx.Row) error {
			var n *int64
			return row.Scan(&held, &n, &h.owners, &h.tokens)
		})
	})
	if err != nil {
		return err
	}
	h.record(b, hash)
	if held == 0 {
		return driver.ErrNotHeld
	}
	return nil
}

// Permits implements driver.SemaphoreBackend. It is read under the key's
// decision lock, so it sees every decision sent before it (a waiter queued
// by another process is counted once its attempt has been decided), and it
// joins this process's combined decision transaction on the key if one is
// forming (sem_batch.go), so a frequent Usage adds no lock hand-over of its
// own while the key is busy.
func (b *Backend) Permits(ctx context.Context, key string) (driver.PermitUsage, error) {
	var u driver.PermitUsage
	hash := b.hash(key)
	err := b.semDecide(ctx, "permits", key, func(batch *pgx.Batch) {
		batch.Queue(b.names.expandPattern(`SELECT
			(SELECT coalesce(sum(count), 0)::int8 FROM {pheld} WHERE kind = $1 AND hash = $2),
			(SELECT count(*) FROM {pheld} WHERE kind = $1 AND hash = $2),
			(SELECT count(*) FROM {pqueue} WHERE kind = $1 AND hash = $2)`), kindSem, hash).QueryRow(func(row pgx.Row) error {
			return row.Scan(&u.InUse, &u.Holders, &u.Waiting)
		})
	})
	return u, err
}
